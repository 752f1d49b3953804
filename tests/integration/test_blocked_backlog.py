"""A claim's cost does not grow with the jobs blocked by a limit: 20,000 jobs of a full key,
ahead of the ready ones by priority and schedule, are out of the ready indexes, so a claim
of any type or of their own type never walks past them, whatever the statistics say.

The measure is the rows the database read for the claim (index entries and table rows on
PostgreSQL and MariaDB, virtual machine steps on SQLite), not its time: stepping over the
backlog costs at least one read per blocked job, and a claim that does not reads a handful.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

import jobq
from jobq.backends.postgresql import claims as postgresql_claims
from jobq.backends.shapes import type_params
from jobq.limits import CONCURRENCY
from tests.conftest import DB_KINDS
from tests.support.jobs import Limited
from tests.support.plans import STATISTICS, statistics_left
from tests.support.servers import fresh_mariadb_database, fresh_postgresql_database

BLOCKED = 20_000
# Far fewer reads than blocked jobs: a walk past them reads each at least once.
MOST_READS = BLOCKED // 10
HERE = {"host": "here", "pid": 1, "worker": "w1", "queued": True}


# Written in a few statements: enqueued, then doubled by copies of itself up to BLOCKED.
FIRST_BLOCKED = BLOCKED // 2**5
COPIED = (
    "type, class_name, payload, status, attempts, max_attempts, backoff, max_backoff, jitter, "
    "scheduled_at, created_at, updated_at, priority, limit_key, blocked_on"
)
STATES = [(kind, state) for kind in DB_KINDS for state in STATISTICS]


@pytest.fixture(scope="module", params=STATES, ids=["-".join(state) for state in STATES])
def backlog(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[jobq.Queue, str]]:
    """BLOCKED jobs of the key `full`, blocked as the limits' triggers leave them, at the
    highest priority and scheduled an hour ago; behind them, ready jobs of other keys. One
    database per kind and statistics state, for every claim of this module."""
    db_kind, state = request.param
    with contextlib.ExitStack() as stack:
        if db_kind == "sqlite":
            dsn = f"sqlite:///{tmp_path_factory.mktemp('backlog')}/jobq.sqlite3"
        else:
            fresh = fresh_postgresql_database if db_kind == "postgresql" else fresh_mariadb_database
            dsn = stack.enter_context(fresh(request.getfixturevalue(f"{db_kind}_server")))
        queue = stack.enter_context(jobq.Queue.connect(dsn))
        queue.install()
        earlier = datetime.now(UTC) - timedelta(hours=1)
        with statistics_left(queue, db_kind, state):
            blocked = [Limited("full", i) for i in range(FIRST_BLOCKED)]
            queue.enqueue_many(blocked, priority=1000, scheduled_at=earlier)
            queue.backend.execute(
                f"UPDATE jobq_jobs SET blocked_on = '{CONCURRENCY}' WHERE limit_key = 'full'"
            )
            for _ in range((BLOCKED // FIRST_BLOCKED).bit_length() - 1):
                queue.backend.execute(
                    f"INSERT INTO jobq_jobs ({COPIED}) "
                    f"SELECT {COPIED} FROM jobq_jobs WHERE limit_key = 'full'"
                )
            queue.enqueue_many([Limited(f"free{i}") for i in range(2)])
        yield queue, db_kind


Claim = Callable[[], "jobq.ClaimedJob | None"]


def sqlite_reads(queue: jobq.Queue, claim: Claim) -> tuple[int, jobq.ClaimedJob | None]:
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    connection = queue.backend.connection
    connection.set_progress_handler(count, 1)
    try:
        job = claim()
    finally:
        connection.set_progress_handler(None, 1)
    return steps, job


def mariadb_reads(queue: jobq.Queue, claim: Claim) -> tuple[int, jobq.ClaimedJob | None]:
    def handler_reads() -> int:
        rows = queue.backend.fetchall("SHOW SESSION STATUS LIKE 'Handler_read%%'")
        return sum(int(value) for _, value in rows)

    before = handler_reads()
    job = claim()
    return handler_reads() - before, job


def postgresql_reads(queue: jobq.Queue, types: tuple[str, ...]) -> int:
    """The claim statement the backend sends, in a transaction that is rolled back, and the
    jobs table's rows and index entries it read (which the probe function's reads count in)."""
    params = {"token": "t", "lease": 60.0, **HERE, **type_params(types)}

    def reads() -> int:
        # The counts not yet flushed to the statistics, earlier transactions' too: hence
        # the difference, within one transaction, which flushes nothing before its end.
        (count,) = queue.backend.fetchone(
            "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
            "FROM pg_stat_xact_user_tables WHERE relname = 'jobq_jobs'"
        )
        return int(count)

    with queue.backend.connection.transaction(force_rollback=True):
        before = reads()
        (claimed,) = queue.backend.fetchone(
            f"WITH c AS ({postgresql_claims.claim_statement(len(types))}) SELECT id FROM c",
            params,
        )
        assert claimed is not None
        return reads() - before


def test_a_claim_never_walks_past_blocked_jobs(backlog: tuple[jobq.Queue, str]) -> None:
    queue, db_kind = backlog
    (blocked,) = queue.backend.fetchone(
        "SELECT count(*) FROM jobq_jobs WHERE blocked_on IS NOT NULL"
    )
    assert blocked == BLOCKED
    for types in ((), ("limited",)):
        claim = functools.partial(queue.claim, list(types) or None)
        if db_kind == "postgresql":
            reads, job = postgresql_reads(queue, types), claim()
        else:
            reads, job = (sqlite_reads if db_kind == "sqlite" else mariadb_reads)(queue, claim)
        assert job is not None
        assert queue.waits_on(job.id)[0] != "full"
        assert reads < MOST_READS, (types, reads)
