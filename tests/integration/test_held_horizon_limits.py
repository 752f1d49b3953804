"""A limited key's admission and wake-ups cost the same behind a held horizon.

Every attempt of a key that ran while a transaction holds its snapshot leaves its entries in
the indexes the limits read (the key's attempts in progress, its blocked jobs), which vacuum
may not remove and no walk may mark dead. The count here is of index entries read, from
pg_stat_user_indexes, by one batched acknowledgement with its claim (which counts each key's
live attempts and claims its next blocked jobs) after 10,000 jobs of one key ran behind such
a snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import jobq
from jobq.backends.postgresql import PostgresBackend
from jobq.limits import CONCURRENCY
from tests.support import drivers
from tests.support.jobs import Limited

pytestmark = pytest.mark.databases("postgresql")

RUN_WHILE_HELD = 10_000
LIMIT = 50
# Index entries one statement may read from each index: a few for each job it acknowledges
# and claims (the primary key's lookups read each row's versions), and of the key's entries
# those of its live attempts and of the batches before them. Far below RUN_WHILE_HELD.
BOUND = 8 * LIMIT


class Busy(jobq.Job):
    """One account's jobs, LIMIT at once."""

    type = "busy"
    concurrency = jobq.Concurrency(LIMIT, key=lambda job: job.account)

    def __init__(self, account: str) -> None:
        self.account = account

    def handle(self) -> None:
        pass


@pytest.fixture
def stats(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(dsn, autocommit=True) as connection:
        yield connection


def entries_read(stats: psycopg.Connection[Any]) -> dict[str, int]:
    """Index entries read from each index of the jobs table so far, as the server counts."""
    stats.execute("SELECT pg_stat_clear_snapshot()")
    rows = stats.execute(
        "SELECT indexrelname, idx_tup_read FROM pg_stat_user_indexes WHERE relname = 'jobq_jobs'"
    ).fetchall()
    return {name: int(read) for name, read in rows}


def counted(queue: jobq.Queue, stats: psycopg.Connection[Any], step: Any) -> dict[str, int]:
    """The index entries `step()` reads, by index (see test_held_horizon_claims.counted)."""
    backend = queue.backend
    assert isinstance(backend, PostgresBackend)
    backend.execute("SELECT pg_stat_force_next_flush()")
    before = entries_read(stats)
    step()
    backend.execute("SELECT pg_stat_force_next_flush()")
    after = entries_read(stats)
    return {name: after[name] - before.get(name, 0) for name in after}


@pytest.fixture
def held(queue: jobq.Queue, dsn: str, db_kind: str) -> Iterator[tuple[jobq.Queue, list[Any]]]:
    """A queue whose key ran RUN_WHILE_HELD jobs behind a snapshot still held, with LIMIT
    of its attempts in progress and more of its jobs blocked."""
    queue.enqueue_many([Busy("a") for _ in range(RUN_WHILE_HELD + 2 * LIMIT)])
    queue.backend.execute("SET jobq.claim_rewalk_seconds = 3600")
    reader = drivers.connect(dsn, db_kind, autocommit=True)
    try:
        drivers.hold_snapshot(reader, db_kind)
        claims = queue.claim_many(LIMIT)
        done = len(claims)
        while done < RUN_WHILE_HELD:
            _, claims = queue.complete_many_and_claim(claims, LIMIT)
            done += len(claims)
        assert len(claims) == LIMIT
        yield queue, claims
    finally:
        reader.rollback()
        reader.close()


def test_a_batched_acknowledgement_of_a_limited_key_reads_a_bounded_number_of_index_entries(
    held: tuple[jobq.Queue, list[Any]], stats: psycopg.Connection[Any]
) -> None:
    queue, claims = held
    taken: list[Any] = []
    read = counted(
        queue, stats, lambda: taken.extend(queue.complete_many_and_claim(claims, LIMIT)[1])
    )
    assert len(taken) == LIMIT
    over = {name: count for name, count in read.items() if count > BOUND}
    assert not over, f"one acknowledgement and claim read {read}"


def test_a_job_blocked_before_the_cursor_waits_only_for_the_next_walk_from_the_head(
    queue: jobq.Queue,
) -> None:
    """A key's walk for its next blocked jobs starts at its session's cursor, as a claim's
    does (blocked_cursors.py), and so passes over a job blocked since at a higher priority
    until the session's next walk from the head."""
    queue.backend.execute("SET jobq.claim_rewalk_seconds = 3600")
    first = queue.enqueue_many([Limited("a", i) for i in range(6)])
    running = queue.claim_many(10)
    assert [claim.id for claim in running] == first[:2]
    # The first acknowledgement's walk starts at the head, and leaves its cursor at first[2].
    _, taken = queue.complete_many_and_claim(running[:1], 1)
    assert [claim.id for claim in taken] == first[2:3]
    urgent = queue.enqueue(Limited("a"), priority=5)
    # A claim meets it, finds its key full, and blocks it.
    assert queue.claim() is None
    assert queue.waits_on(urgent) == ("a", CONCURRENCY)
    _, passed = queue.complete_many_and_claim(taken, 1)
    assert [claim.id for claim in passed] == first[3:4]
    queue.backend.execute("SET jobq.claim_rewalk_seconds = 0")
    _, next_up = queue.complete_many_and_claim(passed, 1)
    assert [claim.id for claim in next_up] == [urgent]
