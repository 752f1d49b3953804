"""jobq-supervise --exit-when-empty drains what is ready, including the jobs its attempts
release, waits for running attempts, and exits 0; a job scheduled later does not keep it
alive. The README's first command runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import jobq
from tests.support.apps.supervised_app import Sleep
from tests.support.paths import REPO
from tests.support.supervising import FAST, supervisor


def test_the_supervisor_drains_what_is_ready_then_exits(dsn: str, tmp_path: Path) -> None:
    journal = str(tmp_path / "journal")
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        first = queue.enqueue(Sleep(0.5, journal))
        others = queue.enqueue_many([Sleep(0.1, journal) for _ in range(3)])
        # Released only as its parent completes: the supervisor must still be there for it.
        child = queue.enqueue(Sleep(0, journal), after=[first])
        later = queue.enqueue(Sleep(0, journal), delay=3600)
        with supervisor(dsn, *FAST, "--workers", "2", env={"JOBQ_EXIT_WHEN_EMPTY": "1"}) as run:
            assert run.wait(60) == 0, run.log
        assert "draining to exit (--exit-when-empty)" in run.log
        for job_id in (first, *others, child):
            record = queue.get(job_id)
            assert record is not None
            assert record.status is jobq.Status.COMPLETED, record
        pending = queue.get(later)
        assert pending is not None
        assert pending.status is jobq.Status.PENDING


def test_the_quick_start_runs_its_jobs_under_the_supervisor(tmp_path: Path) -> None:
    # The README's first command, from another directory: its SQLite file lands there.
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "quickstart.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "$ jobq-supervise --app reports --workers 2 --lease 6 --exit-when-empty" in done.stdout
    assert "job 3 completed in 1 attempt(s)" in done.stdout
    for line in ("Spawned worker", "draining to exit", "jobq-supervise stopped"):
        assert line in done.stderr, done.stderr
    assert (tmp_path / "jobq.sqlite3").exists()
