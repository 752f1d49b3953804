"""What an operator sees of, and does to, a suspended job: its attempt's outcome is
`suspended`, not `retried`; Queue.wake() and `jobq wake ID` run a sleeping job now, past
its sleep. On the three databases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import jobq
from jobq.cli.commands import main
from tests.support.step_jobs import Sleeper, entries

ONCE = jobq.RetryPolicy(max_attempts=1)


class Recorder(jobq.Listener):
    def __init__(self) -> None:
        self.settled: list[jobq.Outcome] = []
        self.failed: list[object] = []

    def on_settled(self, claim: jobq.ClaimedJob, outcome: jobq.Outcome) -> None:
        self.settled.append(outcome)

    def on_failed(self, claim: jobq.ClaimedJob, error: BaseException | str) -> None:
        self.failed.append(error)


def test_a_suspension_s_outcome_is_suspended_not_retried(queue: jobq.Queue, tmp_path: Path) -> None:
    recorder = Recorder()
    queue.listener = recorder
    queue.enqueue(Sleeper(str(tmp_path / "journal"), 3600), retry=ONCE)
    claim = queue.claim()
    assert claim is not None
    assert queue.run(claim) is jobq.Outcome.SUSPENDED
    assert recorder.settled == [jobq.Outcome.SUSPENDED]
    assert recorder.failed == []


def test_wake_runs_a_sleeping_job_now_past_its_sleep(queue: jobq.Queue, tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    job_id = queue.enqueue(Sleeper(str(journal), 3600), retry=ONCE)
    assert queue.process_jobs(1) == 1
    assert queue.process_jobs(1) == 0  # asleep for an hour
    assert queue.wake(job_id) is True
    assert queue.wake(job_id) is False  # due already
    assert queue.process_jobs(1) == 1
    record = queue.wait(job_id, timeout=0)
    assert record.status is jobq.Status.COMPLETED
    assert record.result == [0, 1]
    assert [e["step"] for e in entries(journal)] == [0, 1]
    assert queue.wake(job_id) is False  # not pending


def test_jobq_wake_wakes_from_the_command_line(
    queue: jobq.Queue, tmp_path: Path, dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = queue.enqueue(Sleeper(str(tmp_path / "journal"), 3600), retry=ONCE)
    assert queue.process_jobs(1) == 1
    assert main(["show", str(job_id), "--json", "--dsn", dsn]) == 0
    assert json.loads(capsys.readouterr().out)["suspended"].startswith("sleeping until ")
    assert main(["wake", str(job_id), "--dsn", dsn]) == 0
    assert f"job {job_id} is due now" in capsys.readouterr().out
    assert main(["wake", str(job_id), "--dsn", dsn]) == 1
    assert "not woken" in capsys.readouterr().err
    assert queue.process_jobs(1) == 1
    assert queue.wait(job_id, timeout=0).status is jobq.Status.COMPLETED
    assert main(["show", str(job_id), "--json", "--dsn", dsn]) == 0
    assert json.loads(capsys.readouterr().out)["suspended"] is None
