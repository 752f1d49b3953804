"""jobq-supervise with real processes and signals, on every database."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

import jobq
from tests.support.apps.supervised_app import Crash, Sleep
from tests.support.supervising import FAST, events, supervisor, wait_for_events
from tests.support.waiting import wait_for

pytestmark = pytest.mark.lease(6)


def test_a_job_longer_than_several_leases_runs_once(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    job_id = queue.enqueue(Sleep(14, str(journal)))
    with supervisor(dsn, "--workers", "2", *FAST) as running:
        wait_for("the job to complete", lambda: queue.counts() == {"completed": 1}, 40)
        running.signal(signal.SIGTERM)
        assert running.wait() == 0
    assert [(e["job"], e["attempt"]) for e in events(journal, "start")] == [(job_id, 1)]
    assert len(events(journal, "end")) == 1
    record = queue.get(job_id)
    assert record is not None
    assert record.attempts == 1


def test_a_killed_worker_fails_its_attempt_at_once(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    job_id = queue.enqueue(Crash(str(journal)), retry=jobq.RetryPolicy(max_attempts=1))
    with supervisor(dsn, "--workers", "1", *FAST) as running:
        wait_for_events(journal, "start")
        # Well within the 6 s lease: it was the master, not maintenance, that failed it.
        wait_for("the attempt to fail", lambda: queue.counts() == {"failed": 1}, timeout=4)
        record = queue.get(job_id)
        assert record is not None
        assert record.last_error is not None
        assert "signal SIGKILL" in record.last_error
        running.signal(signal.SIGTERM)
        assert running.wait() == 0
