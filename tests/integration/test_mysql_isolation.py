"""Every transaction jobq opens on MariaDB is READ COMMITTED, the failures' settling among
them: REPEATABLE READ, MySQL's default, takes gap locks on the status index and makes
concurrent claims deadlock. Read from the server's own record of each transaction, on a
MariaDB of this module's own that keeps one (the performance schema's transaction history)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import jobq
from tests.support.jobs import Boom, Noop
from tests.support.servers import ServerInfo, fresh_mariadb_database, mariadb_admin, started_mariadb

HISTORY = "performance_schema.events_transactions_history_long"
PERFORMANCE_SCHEMA = (
    "--performance-schema=ON",
    "--performance-schema-instrument=transaction=ON",
    # The history is fed from the current events: both must be on.
    "--performance-schema-consumer-events-transactions-current=ON",
    "--performance-schema-consumer-events-transactions-history-long=ON",
)


@pytest.fixture(scope="module")
def recording_mariadb() -> Iterator[ServerInfo]:
    with started_mariadb(lambda base: PERFORMANCE_SCHEMA) as server:
        yield server.info


def test_every_transaction_jobq_opens_on_mariadb_is_read_committed(
    recording_mariadb: ServerInfo,
) -> None:
    with (
        fresh_mariadb_database(recording_mariadb) as dsn,
        jobq.Queue.connect(dsn, lease_duration=60) as queue,
    ):
        queue.install()
        queue.enqueue(Boom("settled for good"), retry=jobq.RetryPolicy(max_attempts=1))
        queue.enqueue(Boom("settled for a retry"), retry=jobq.RetryPolicy(max_attempts=2))
        queue.enqueue(Noop())
        with mariadb_admin(recording_mariadb) as admin, admin.cursor() as cursor:
            cursor.execute(f"TRUNCATE TABLE {HISTORY}")
            assert queue.process_jobs(3) == 3
            queue.enqueue(Noop())
            claim = queue.claim()
            assert claim is not None
            queue.fail(claim, "failed by hand")
            cursor.execute(
                f"""
                SELECT ISOLATION_LEVEL, count(*) FROM {HISTORY}
                WHERE AUTOCOMMIT = 'NO' AND THREAD_ID <> (
                    SELECT THREAD_ID FROM performance_schema.threads
                    WHERE PROCESSLIST_ID = CONNECTION_ID())
                GROUP BY ISOLATION_LEVEL
                """
            )
            levels = dict(cursor.fetchall())
    assert set(levels) == {"READ COMMITTED"}, levels
