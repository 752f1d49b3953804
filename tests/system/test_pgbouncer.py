"""jobq behind a real PgBouncer in transaction-pooling mode: every statement stands alone,
no server-side prepared statement outlives its transaction, and wake-ups take a direct
connection or are done without."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import jobq
from tests.support.apps.supervised_app import Sleep
from tests.support.jobs import Noop
from tests.support.paths import REPO
from tests.support.supervising import FAST, read_journal, supervisor
from tests.support.waiting import wait_for

JOBS = 600
PROCESSES = 4

# Each process claims and runs jobs until none is left, well past psycopg's prepare
# threshold on every statement it sends, then reads the counts the same way.
DRAIN = """
import sys
import pytest

import jobq
sys.path.insert(0, {root!r})
import tests.support.jobs  # registers the job class
with jobq.Queue.connect({dsn!r}) as queue:
    while queue.process_jobs(50):
        pass
    for _ in range(10):
        queue.counts()
"""


def test_processes_drain_a_queue_through_pgbouncer(pooled_dsns: tuple[str, str]) -> None:
    pooled, _ = pooled_dsns
    with jobq.Queue.connect(pooled) as queue:
        queue.install()
        ids = queue.enqueue_many([Noop() for _ in range(JOBS)])
        assert len(set(ids)) == JOBS
        code = DRAIN.format(root=str(REPO), dsn=pooled)
        workers = [
            subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
            for _ in range(PROCESSES)
        ]
        errors = [worker.communicate(timeout=120)[1] for worker in workers]
        assert [worker.returncode for worker in workers] == [0] * PROCESSES, errors
        # Any warning (a retried statement, a failed attempt) would be on stderr.
        assert errors == [""] * PROCESSES, errors
        for _ in range(10):
            assert queue.counts() == {"completed": JOBS}


@pytest.mark.parametrize("flagged", [True, False], ids=["pool_mode", "no_pool_mode"])
def test_supervised_workers_run_jobs_through_pgbouncer(
    pooled_dsns: tuple[str, str], tmp_path: Path, flagged: bool
) -> None:
    pooled, direct = pooled_dsns
    # Without pool_mode=transaction, as a user who was never told of it: jobq finds the
    # pooler itself, and says what the DSN lacks.
    dsn = pooled if flagged else pooled.removesuffix("?pool_mode=transaction")
    journal = tmp_path / "journal"
    with jobq.Queue.connect(pooled) as queue:
        queue.install()
        with supervisor(dsn, *FAST, "--workers", "4", "--listen-dsn", direct) as running:
            queue.enqueue_many([Sleep(0, str(journal)) for _ in range(200)])
            wait_for(
                "every job to complete",
                lambda: queue.counts() == {"completed": 200},
                timeout=60,
            )
            assert "prepared statement" not in running.log, running.log
            assert "Could not record" not in running.log, running.log
            assert ("add pool_mode=transaction to the DSN" in running.log) is not flagged, (
                running.log
            )
    assert sum(event["event"] == "end" for event in read_journal(journal)) == 200
