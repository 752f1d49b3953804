"""The hooks an application declares run in jobq's workers, around each job, after the fork."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import jobq
from jobq.testing.history import read_journal
from tests.support.apps import APPS
from tests.support.supervising import FAST, supervisor
from tests.support.waiting import wait_for


class Step(jobq.Job):
    """The producer's side of hooks_app.Step (same job_name)."""

    job_name = "Step"


pytestmark = pytest.mark.lease(6)


@pytest.mark.databases("sqlite", "postgresql")
@pytest.mark.parametrize(
    "pool", [("2",), ("1", "--concurrency", "4")], ids=["processes", "concurrency"]
)
def test_hooks_run_in_each_worker_around_each_job(
    queue: jobq.Queue, dsn: str, tmp_path: Path, pool: tuple[str, ...]
) -> None:
    """In a process worker, or around each attempt of a worker with --concurrency, in the
    thread that runs its code (never the worker's database thread)."""
    plain = [queue.enqueue(Step(), type="plain") for _ in range(6)]
    refused = queue.enqueue(Step(), type="refused", retry=jobq.RetryPolicy(max_attempts=1))
    messy = queue.enqueue(Step(), type="messy")
    journal = tmp_path / "journal"
    args = ("--workers", *pool, "--app", "hooks_app", *FAST)
    with supervisor(dsn, *args, env={"HOOKS_JOURNAL": str(journal)}) as running:
        wait_for(
            "every job to be settled",
            lambda: queue.counts() == {"completed": len(plain) + 1, "failed": 1},
            timeout=30,
        )
        workers = {p.pid for p in running.workers()}
        running.signal(signal.SIGTERM)
        assert running.wait() == 0
    entries = read_journal(journal)
    # Once in each worker, after its fork (the master's check of the app starts no worker).
    assert {e["pid"] for e in entries if e["event"] == "worker_start"} == workers
    for job_id in [*plain, messy]:
        mine = [(e["event"], e["pid"]) for e in entries if e.get("job") == job_id]
        assert [event for event, _ in mine] == ["before", "handle", "after"], mine
        assert len({pid for _, pid in mine}) == 1
    threads = {e["thread"] for e in entries if e["event"] in ("before", "handle", "after")}
    runs_code = "MainThread" if pool == ("2",) else "jobq-job"
    assert all(name.startswith(runs_code) for name in threads), threads
    outcomes = {e["job"]: e["outcome"] for e in entries if e["event"] == "after"}
    assert outcomes[messy] == "completed"
    # A before_job hook that raises fails the attempt, naming the hook; handle() never ran.
    assert [e["event"] for e in entries if e.get("job") == refused] == ["before", "after"]
    assert outcomes[refused] == "failed"
    record = queue.get(refused)
    assert record is not None
    assert record.last_error is not None
    assert "before_job hook hooks_app.before raised PermissionError" in record.last_error
    # An after_job hook's error is logged; its job stays completed.
    assert "after_job hook hooks_app.after raised" in running.log
    assert "an after_job hook that fails" in running.log


@pytest.mark.databases("sqlite")
def test_jobq_work_runs_the_hooks_too(queue: jobq.Queue, dsn: str, tmp_path: Path) -> None:
    queue.enqueue(Step())
    journal = tmp_path / "journal"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "jobq",
            "work",
            "--dsn",
            dsn,
            "--app",
            "hooks_app",
            "--max-jobs",
            "1",
        ],
        env={**os.environ, "PYTHONPATH": str(APPS), "HOOKS_JOURNAL": str(journal)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    events = [e["event"] for e in read_journal(journal)]
    assert events == ["worker_start", "before", "handle", "after"]
