"""A claim's cost does not grow with the jobs run while an old snapshot holds back cleanup.

While any transaction keeps its snapshot (a report, a dump, a session left idle in a
transaction), PostgreSQL can neither vacuum the ready indexes' entries of the jobs claimed
since nor mark them dead: a walk from the head of the index steps over every one of them.
The claims count here is of index entries read, from pg_stat_user_indexes, for one claim
and one batched claim after 50,000 jobs were claimed and completed behind such a snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import jobq
from jobq.backends.mysql import MysqlBackend
from jobq.backends.postgresql import PostgresBackend
from tests.support import drivers
from tests.support.jobs import Noop

pytestmark = pytest.mark.databases("postgresql")

# Jobs claimed and completed while the snapshot is held, in batches as a worker takes them.
RUN_WHILE_HELD = 50_000
BATCH = 500
# Jobs left ready afterwards, for the claims measured.
LEFT = 20
# Index entries one claim may read: a walk from where its session's last walk started, past
# that walk's batch and what other sessions took since, and the primary key lookups of its
# update. Far below RUN_WHILE_HELD.
BOUND = BATCH + 20


@pytest.fixture
def stats(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(dsn, autocommit=True) as connection:
        yield connection


def entries_read(stats: psycopg.Connection[Any]) -> int:
    """Index entries read from every index of the jobs table so far, as the server counts."""
    stats.execute("SELECT pg_stat_clear_snapshot()")
    row = stats.execute(
        "SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes "
        "WHERE relname = 'jobq_jobs'"
    ).fetchone()
    assert row is not None
    return int(row[0])


def counted(queue: jobq.Queue, stats: psycopg.Connection[Any], claim: Any) -> int:
    """The index entries `claim()` reads. A session reports its counts to the server at most
    once a second as it goes idle (PostgreSQL 15's shared statistics); a statement that
    forces the next report makes it report everything before it, before the client hears
    back."""
    backend = queue.backend
    assert isinstance(backend, PostgresBackend)
    backend.execute("SELECT pg_stat_force_next_flush()")
    before = entries_read(stats)
    claim()
    backend.execute("SELECT pg_stat_force_next_flush()")
    return entries_read(stats) - before


def drain(queue: jobq.Queue, count: int) -> None:
    """Claim and complete `count` jobs in batches, each acknowledged with the next claim."""
    claims = queue.claim_many(BATCH)
    done = len(claims)
    while claims:
        more = min(BATCH, count - done)
        _, claims = queue.complete_many_and_claim(claims, more)
        done += len(claims)
    assert done == count


@pytest.fixture
def held(queue: jobq.Queue, dsn: str, db_kind: str) -> Iterator[jobq.Queue]:
    """A queue whose last RUN_WHILE_HELD jobs ran behind a snapshot still held."""
    queue.enqueue_many([Noop() for _ in range(RUN_WHILE_HELD + LEFT)])
    # No walk from the head of the index on a clock (the bound on order, cursors.py)
    # while the claims are counted: only the walks from the cursor.
    queue.backend.execute("SET jobq.claim_rewalk_seconds = 3600")
    reader = drivers.connect(dsn, db_kind, autocommit=True)
    try:
        drivers.hold_snapshot(reader, db_kind)
        drain(queue, RUN_WHILE_HELD)
        yield queue
    finally:
        reader.rollback()
        reader.close()


def test_a_claim_behind_a_held_snapshot_reads_a_bounded_number_of_index_entries(
    held: jobq.Queue, stats: psycopg.Connection[Any]
) -> None:
    claims: list[jobq.ClaimedJob | None] = []
    read = counted(held, stats, lambda: claims.append(held.claim()))
    assert claims[0] is not None
    assert read <= BOUND, f"one claim read {read} index entries"


def test_a_batched_claim_behind_a_held_snapshot_reads_a_bounded_number_of_index_entries(
    held: jobq.Queue, stats: psycopg.Connection[Any]
) -> None:
    claims: list[Any] = []
    read = counted(held, stats, lambda: claims.extend(held.claim_many(5)))
    assert len(claims) == 5
    assert read <= BOUND, f"one batched claim of 5 read {read} index entries"


def rewalk_after(queue: jobq.Queue, seconds: float) -> None:
    """Make the queue's claims walk from the head of the index `seconds` after the last."""
    if isinstance(queue.backend, MysqlBackend):
        queue.backend.claim_cursors.rewalk_seconds = seconds
    else:
        queue.backend.execute(f"SET jobq.claim_rewalk_seconds = {seconds}")


@pytest.mark.databases("postgresql", "mariadb")
def test_a_job_placed_before_the_cursor_waits_only_for_the_next_walk_from_the_head(
    queue: jobq.Queue,
) -> None:
    rewalk_after(queue, 3600)
    later = queue.enqueue_many([Noop() for _ in range(5)])
    first = queue.claim()
    assert first is not None
    assert first.id == later[0]
    urgent = queue.enqueue(Noop(), priority=5)
    # The walk starts at the cursor, past the head where the urgent job sits...
    passed = queue.claim()
    assert passed is not None
    assert passed.id == later[1]
    # ...until the session's next walk from the head, REWALK_SECONDS later at most.
    rewalk_after(queue, 0)
    taken = queue.claim()
    assert taken is not None
    assert taken.id == urgent
    rewalk_after(queue, 3600)
    rest = queue.claim_many(10)
    assert [claim.id for claim in rest] == later[2:]
    # A walk from the cursor that finds nothing walks from the head at once.
    earlier = queue.enqueue(Noop(), scheduled_at=datetime.now(UTC) - timedelta(hours=1))
    found = queue.claim()
    assert found is not None
    assert found.id == earlier


@pytest.mark.databases("postgresql", "mariadb")
@pytest.mark.parametrize("types", [None, ["email"], ["email", "sms"]])
def test_each_walk_starts_at_the_first_row_the_last_returned_so_none_is_passed_over(
    queue: jobq.Queue, types: list[str] | None
) -> None:
    """With several types, each type's probe returns its first row and the claim takes one:
    the other is found again by the next claim, not passed over by the cursor."""
    rewalk_after(queue, 3600)
    ids = []
    for _ in range(6):
        ids += [queue.enqueue(Noop(), type="email"), queue.enqueue(Noop(), type="sms")]
    wanted = [i for i in ids if types is None or len(types) == 2 or i in ids[::2]]
    taken = []
    while (claim := queue.claim(types)) is not None:
        taken.append(claim.id)
    assert taken == wanted
