"""Results, progress and checkpoints across processes: wait() for a job another process
finishes, woken by NOTIFY or polling; and an attempt SIGSTOPped until another replaced it,
which cannot overwrite the progress or checkpoint of the attempt that did."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import jobq
from jobq.queue import waiting
from tests.support.paths import REPO
from tests.support.result_jobs import Gate, Stale
from tests.support.waiting import wait_for, wait_lease_ended

# Runs one job, as `jobq work` would, with the lease given: nobody renews it.
RUN_ONE = """
import sys, jobq, tests.support.result_jobs
with jobq.Queue.connect(sys.argv[1], lease_duration=float(sys.argv[2])) as queue:
    sys.exit(0 if queue.process_jobs(1, type=sys.argv[3]) == 1 else 3)
"""


@contextmanager
def worker(dsn: str, job_type: str, lease: float = 600) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        [sys.executable, "-c", RUN_ONE, dsn, str(lease), job_type],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)


def status(dsn: str, job_id: int) -> jobq.Status | None:
    with jobq.Queue.connect(dsn) as queue:
        record = queue.get(job_id)
    return None if record is None else record.status


def waited_for(dsn: str, job_id: int) -> bool:
    with jobq.Queue.connect(dsn) as queue:
        row = queue.backend.fetchone("SELECT waited FROM jobq_jobs WHERE id = %s", (job_id,))
    return bool(row[0])


def finished_elsewhere(
    queue: jobq.Queue, waiter: jobq.Queue, dsn: str, tmp_path: Path, notified: bool
) -> jobq.JobRecord:
    """What `waiter` waits for: a job another process runs, which ends once it runs (and,
    when `notified`, once the waiter watches it)."""
    gate = tmp_path / "gate"
    job_id = queue.enqueue(Gate(str(gate)))

    def open_gate() -> None:
        wait_for("the job to run", lambda: status(dsn, job_id) is jobq.Status.IN_PROGRESS, 60)
        if notified:
            wait_for("the waiter to watch the job", lambda: waited_for(dsn, job_id), 60)
        # Whole or not at all: the job reads the file as soon as it exists.
        written = tmp_path / "written"
        written.write_text("opened")
        written.rename(gate)

    opener = threading.Thread(target=open_gate, daemon=True)
    with worker(dsn, Gate.type) as process:
        opener.start()
        record = waiter.wait(job_id, timeout=120)
        assert process.wait(60) == 0
    opener.join(5)
    assert waiter.backend.transaction_problem() is None
    return record


def test_wait_polls_for_a_job_another_process_finished(
    queue: jobq.Queue, dsn: str, db_kind: str, tmp_path: Path
) -> None:
    # Through a transaction pooler a PostgreSQL session cannot LISTEN: it polls.
    polled = f"{dsn}?pool_mode=transaction" if db_kind == "postgresql" else dsn
    with jobq.Queue.connect(polled) as waiter:
        record = finished_elsewhere(queue, waiter, dsn, tmp_path, notified=False)
    assert record.status is jobq.Status.COMPLETED
    assert record.result == "opened"


@pytest.mark.databases("postgresql")
def test_wait_is_woken_by_notify_when_a_job_another_process_ran_ends(
    queue: jobq.Queue, dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only a wake-up can end this wait in time: the row is not read again for an hour.
    monkeypatch.setattr(waiting, "NOTIFIED_POLL", 3600.0)
    record = finished_elsewhere(queue, queue, dsn, tmp_path, notified=True)
    assert record.status is jobq.Status.COMPLETED
    assert record.result == "opened"
    # The LISTEN went with the wait: the connection is as it was.
    assert queue.backend.fetchone("SELECT count(*) FROM pg_listening_channels()")[0] == 0


def test_an_attempt_stopped_and_replaced_cannot_overwrite_its_successor(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    """Attempt 1 reports, then is SIGSTOPped until its lease ends and attempt 2, in another
    process, has reported in turn; SIGCONTed, attempt 1 reports again and is refused, and its
    completion too. Attempt 2 then completes, its own values intact."""
    job_id = queue.enqueue(Stale(str(tmp_path)), retry=jobq.RetryPolicy(backoff=0))
    with worker(dsn, Stale.type, lease=2) as first:
        wait_for("attempt 1 to report", (tmp_path / "started1").exists, 60)
        assert (tmp_path / "started1").read_text() == "True"
        os.kill(first.pid, signal.SIGSTOP)
        try:
            wait_lease_ended(queue, job_id)
            assert queue.run_maintenance()["requeued"] == 1
            with worker(dsn, Stale.type) as second:
                wait_for("attempt 2 to report", (tmp_path / "started2").exists, 60)
                assert (tmp_path / "started2").read_text() == "True"
                (tmp_path / "go1").touch()
                os.kill(first.pid, signal.SIGCONT)
                assert first.wait(60) == 0
                assert (tmp_path / "wrote1").read_text() == "False", "a stale checkpoint landed"
                record = queue.get(job_id)
                assert record is not None
                assert record.status is jobq.Status.IN_PROGRESS
                assert record.checkpoint == {"attempt": 2}
                assert record.progress == (2, None, "attempt 2")
                (tmp_path / "go2").touch()
                assert second.wait(60) == 0
        finally:
            if first.poll() is None:
                os.kill(first.pid, signal.SIGCONT)
    assert (tmp_path / "wrote2").read_text() == "True"
    done = queue.wait(job_id, timeout=0)
    assert done.result == "attempt 2"
    assert done.progress == (102, None, "attempt 2 again")
    assert done.checkpoint is None
    assert [entry.attempt for entry in done.history] == [1, 2]
