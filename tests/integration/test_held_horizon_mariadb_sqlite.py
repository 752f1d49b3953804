"""What a claim reads behind a long reader on MariaDB and SQLite, as
test_held_horizon_claims.py counts it on PostgreSQL.

MariaDB: a transaction holding a consistent snapshot keeps purge from removing the ready
indexes' delete-marked entries of every job claimed since, and a claim's walk from the head
of the index stepped over each, reading pages as it went (40,097 after 20,000 jobs, against
2,052 with no reader), until claims walked from a cursor (mysql/cursors.py). InnoDB counts
those entries in no Handler_read status (which count the rows returned), so the count here is
of the buffer pool's page reads (Innodb_buffer_pool_read_requests), which the test's claim has
to itself.

SQLite: an update removes an index entry in place, whoever reads: a long reader keeps the
WAL from being checkpointed (it grows), not dead entries in the index a claim walks. The
count here is of the ready indexes' entries, read from their pages (dbstat).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import jobq
from jobq.backends.mysql import MysqlBackend
from tests.support import drivers
from tests.support.jobs import Noop

RUN_WHILE_HELD = 20_000
BATCH = 500
LEFT = 20


def drain(queue: jobq.Queue, count: int) -> None:
    """Claim and complete `count` jobs in batches, each acknowledged with the next claim."""
    claims = queue.claim_many(BATCH)
    done = len(claims)
    while done < count:
        _, claims = queue.complete_many_and_claim(claims, min(BATCH, count - done))
        done += len(claims)
    queue.complete_many_and_claim(claims, 0)


@pytest.fixture
def held(queue: jobq.Queue, dsn: str, db_kind: str) -> Iterator[jobq.Queue]:
    """A queue whose last RUN_WHILE_HELD jobs ran behind a reader still open, LEFT ready."""
    queue.enqueue_many([Noop() for _ in range(RUN_WHILE_HELD + LEFT)])
    # No walk from the head of the index on a clock (the bound on order, mysql/cursors.py)
    # while the claim is counted: only the walk from the cursor.
    if isinstance(queue.backend, MysqlBackend):
        queue.backend.claim_cursors.rewalk_seconds = 3600
    reader = drivers.connect(dsn, db_kind, autocommit=True)
    try:
        drivers.hold_snapshot(reader, db_kind)
        drain(queue, RUN_WHILE_HELD)
        yield queue
    finally:
        reader.rollback()
        reader.close()


def page_reads(queue: jobq.Queue) -> int:
    (row,) = queue.backend.fetchall(
        "SHOW GLOBAL STATUS WHERE Variable_name = 'Innodb_buffer_pool_read_requests'"
    )
    return int(row[1])


# Pages one claim may read: a few for each entry of the batch its walk starts at (see
# mysql/cursors.py) and its lookups. Behind the
# reader, main's claim read two a job claimed since (40,097 after 20,000).
PAGE_BOUND = 4 * BATCH


@pytest.mark.databases("mariadb")
def test_a_claim_behind_a_long_reader_reads_a_bounded_number_of_pages_on_mariadb(
    held: jobq.Queue,
) -> None:
    before = page_reads(held)
    claim = held.claim()
    read = page_reads(held) - before
    assert claim is not None
    assert read <= PAGE_BOUND, f"one claim read {read} pages"


def index_entries(connection: Any, index: str) -> int:
    (row,) = connection.execute(
        "SELECT coalesce(sum(ncell), 0) FROM dbstat WHERE name = ? AND pagetype = 'leaf'",
        (index,),
    ).fetchall()
    return int(row[0])


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize("index", ["jobq_jobs_ready", "jobq_jobs_ready_by_type"])
def test_behind_a_long_reader_the_ready_indexes_hold_only_the_ready_jobs_on_sqlite(
    held: jobq.Queue, dsn: str, index: str
) -> None:
    connection = drivers.connect(dsn, "sqlite", autocommit=True)
    try:
        assert index_entries(connection, index) == LEFT
    finally:
        connection.close()
