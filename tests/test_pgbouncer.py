"""jobq behind a real PgBouncer in transaction-pooling mode: every statement stands alone,
no server-side prepared statement outlives its transaction, and wake-ups take a direct
connection or are done without."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import jobq

from .supervised_app import Sleep
from .supervising import FAST, read_journal, supervisor
from .support import Noop, wait_for

JOBS = 600
PROCESSES = 4

# Each process claims and runs jobs until none is left, well past psycopg's prepare
# threshold on every statement it sends, then reads the counts the same way.
DRAIN = """
import sys
import pytest

import jobq
sys.path.insert(0, {root!r})
import tests.support  # registers the job class
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
        code = DRAIN.format(root=str(Path(__file__).parent.parent), dsn=pooled)
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


def test_without_a_listen_dsn_idle_workers_poll(pooled_dsns: tuple[str, str]) -> None:
    pooled, _ = pooled_dsns
    with jobq.Queue.connect(pooled) as queue:
        assert queue.backend.listen() is False


def test_wake_ups_come_over_the_listen_dsn(pooled_dsns: tuple[str, str]) -> None:
    pooled, direct = pooled_dsns
    with (
        jobq.Queue.connect(pooled, listen_dsn=direct) as worker,
        jobq.Queue.connect(pooled) as producer,
    ):
        producer.install()
        assert worker.backend.listen() is True
        assert worker.backend.wait_for_jobs(0.05) is False
        producer.enqueue_many([Noop(), Noop()], type="a")
        assert worker.backend.wait_for_jobs(10.0) is True


def test_supervised_workers_run_jobs_through_pgbouncer(
    pooled_dsns: tuple[str, str], tmp_path: Path
) -> None:
    pooled, direct = pooled_dsns
    journal = tmp_path / "journal"
    with jobq.Queue.connect(pooled) as queue:
        queue.install()
        with supervisor(pooled, *FAST, "--workers", "4", "--listen-dsn", direct) as running:
            queue.enqueue_many([Sleep(0, str(journal)) for _ in range(200)])
            wait_for(
                "every job to complete",
                lambda: queue.counts() == {"completed": 200},
                timeout=60,
            )
            assert "prepared statement" not in running.log, running.log
            assert "Could not record" not in running.log, running.log
    assert sum(event["event"] == "end" for event in read_journal(journal)) == 200


@pytest.mark.parametrize(
    ("dsn", "listen_dsn", "message"),
    [
        ("postgresql://u@127.0.0.1:1/db?pool_mode=statement", None, "pool_mode in the DSN must"),
        ("sqlite:///jobq.sqlite3", "postgresql://u@127.0.0.1:1/db", "both DSNs must be"),
        ("postgresql://u@127.0.0.1:1/db", "mysql://u@127.0.0.1:1/db", "both DSNs must be"),
    ],
)
def test_bad_pooling_options_are_refused_by_name(
    dsn: str, listen_dsn: str | None, message: str
) -> None:
    with pytest.raises(jobq.ConfigurationError, match=message):
        jobq.Queue.connect(dsn, listen_dsn=listen_dsn)
