"""Durable steps: a recorded step returns its value on every later attempt without running,
a step that raises records nothing, names are unique within a run, only the attempt that
holds the job records a step (an attempt that lost it stops then). On the three databases."""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import pytest

import jobq
from jobq.backends.base import Backend
from jobq.backends.step_records import StepRecord
from jobq.cli.commands import main
from jobq.testing import drain
from jobq.worker.concurrent.attempts import OneStatementAtATime
from tests.support.step_jobs import (
    AsyncSleeper,
    AsyncSteps,
    Flaky,
    Ledger,
    Sleeper,
    Snoozer,
    Steps,
    Twice,
    entries,
    finished,
)
from tests.support.waiting import wait_for, wait_lease_ended

AGAIN = jobq.RetryPolicy(max_attempts=3, backoff=0, jitter=False)


def runs(journal: Path) -> list[tuple[int, int]]:
    """(attempt, step) of every run of a step's function."""
    return [(e["attempt"], e["step"]) for e in entries(journal) if e["event"] == "ran"]


@pytest.mark.parametrize("kind", [Steps, AsyncSteps])
def test_a_recorded_step_returns_its_value_on_later_attempts_without_running(
    queue: jobq.Queue, tmp_path: Path, kind: type[Steps]
) -> None:
    journal = tmp_path / "journal"
    job_id = queue.enqueue(kind(4, str(journal), fail_after=1), retry=AGAIN)
    assert queue.process_jobs(2) == 2
    record = queue.wait(job_id, timeout=0)
    assert record.status is jobq.Status.COMPLETED
    # Steps 0 and 1 ran in the first attempt alone; the second replayed them.
    assert runs(journal) == [(1, 0), (1, 1), (2, 2), (2, 3)]
    keys = [f"jobq-{job_id}-step-{n}" for n in range(4)]
    assert record.result == [{"n": n, "key": keys[n]} for n in range(4)]
    assert [e["key"] for e in entries(journal) if e["event"] == "ran"] == keys
    listed = queue.backend.step_records(job_id)
    assert [(step.name, step.attempt) for step in listed] == [
        ("step-0", 1),
        ("step-1", 1),
        ("step-2", 2),
        ("step-3", 2),
    ]
    assert all(isinstance(step, StepRecord) and step.size > 0 for step in listed)


def test_a_step_that_raises_records_nothing_and_its_retry_reruns_it_in_place(
    queue: jobq.Queue, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    job_id = queue.enqueue(Flaky(str(journal), failures=2, tries=3))
    assert queue.process_jobs(1) == 1
    assert queue.wait(job_id, timeout=0).result == "charged"
    assert runs(journal) == [(1, 0)] * 3
    assert len({e["key"] for e in entries(journal)}) == 1

    other = tmp_path / "other"
    failing = queue.enqueue(Flaky(str(other), failures=9, tries=2), retry=AGAIN)
    assert queue.process_jobs(1) == 1
    record = queue.get(failing)
    assert record is not None
    assert record.status is jobq.Status.PENDING
    assert record.error_class == "builtins.ConnectionError"
    assert queue.backend.steps_of(failing) == {}


def test_a_name_used_twice_in_one_run_fails_the_attempt_with_a_clear_error(
    queue: jobq.Queue,
) -> None:
    job_id = queue.enqueue(Twice(), retry=jobq.RetryPolicy(max_attempts=1))
    assert queue.process_jobs(1) == 1
    record = queue.wait(job_id, timeout=0)
    assert record.status is jobq.Status.FAILED
    assert record.error_class == "jobq.errors.DuplicateStep"
    assert "step 'same' already ran in this run" in (record.last_error or "")
    assert queue.backend.steps_of(job_id) == {"same": "1"}


class Outlive(jobq.Job):
    """A step that runs past its attempt's lease, then returns the attempt that ran it."""

    job_name = "steps.Outlive"
    type = "steps"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    def outlive(self) -> int:
        claim = jobq.current_claim()
        assert claim is not None
        if claim.attempt == 1:
            with jobq.Queue.connect(self.dsn) as other:
                wait_lease_ended(other, claim.id)
        return claim.attempt

    def handle(self) -> Any:
        return jobq.step("outlive", self.outlive)


@pytest.mark.lease(0.5)
def test_a_step_recorded_by_an_attempt_that_lost_its_lease_is_refused_and_it_stops(
    queue: jobq.Queue, dsn: str
) -> None:
    job_id = queue.enqueue(Outlive(dsn), retry=AGAIN)
    first = queue.claim()
    assert first is not None
    # Its failure lands (nobody took the job yet, and a failure is not a step): the job's
    # retry policy decides, as for any attempt that stopped.
    assert queue.run(first) is jobq.Outcome.RETRIED
    assert queue.backend.steps_of(job_id) == {}
    stopped = queue.get(job_id)
    assert stopped is not None
    assert stopped.error_class == "jobq.errors.StepRefused"
    second = queue.claim()
    assert second is not None
    assert queue.run(second) is jobq.Outcome.COMPLETED
    assert queue.wait(job_id, timeout=0).result == 2
    assert queue.backend.steps_of(job_id) == {"outlive": "2"}


def test_steps_and_their_keys_work_only_in_a_job() -> None:
    with pytest.raises(RuntimeError, match=r"jobq.step\(\) is for a job's handle"):
        jobq.step("x", lambda: 1)
    with pytest.raises(RuntimeError, match=r"step_key\(\) is for the function"):
        jobq.step_key()


ONCE = jobq.RetryPolicy(max_attempts=1)


@pytest.mark.parametrize("kind", [Sleeper, AsyncSleeper])
def test_a_durable_sleep_frees_the_worker_and_resumes_past_itself_uncounted(
    queue: jobq.Queue, tmp_path: Path, kind: type[Sleeper]
) -> None:
    journal = tmp_path / "journal"
    job_id = queue.enqueue(kind(str(journal), 1.0), retry=ONCE)
    assert queue.process_jobs(1) == 1
    asleep = queue.get(job_id)
    assert asleep is not None
    # Pending again, due when it wakes: no worker holds it, and its one attempt is not spent.
    assert asleep.status is jobq.Status.PENDING
    assert asleep.scheduled_at > asleep.updated_at
    assert (asleep.attempts, asleep.retry.max_attempts) == (1, 2)
    assert (asleep.last_error or "").startswith("Suspended: sleeping until ")
    assert queue.process_jobs(1) == 0  # not due yet
    record = wait_for("the sleeper to wake and complete", lambda: finished(queue, job_id))
    assert record.status is jobq.Status.COMPLETED
    assert record.result == [0, 1]
    assert [e["step"] for e in entries(journal)] == [0, 1]
    assert (record.history[0].error or "").startswith("Suspended: sleeping until ")
    assert record.history[1].error is None


def test_a_snooze_runs_the_job_again_later_uncounted_and_no_handler_catches_it(
    queue: jobq.Queue, tmp_path: Path
) -> None:
    job_id = queue.enqueue(Snoozer(str(tmp_path / "journal"), times=2), retry=ONCE)
    assert queue.process_jobs(5) == 3
    record = queue.wait(job_id, timeout=0)
    assert record.status is jobq.Status.COMPLETED
    assert record.result == 3
    assert (record.attempts, record.retry.max_attempts) == (3, 3)
    assert [entry.error for entry in record.history][:2] == ["Suspended: snoozed for 0 s"] * 2


def test_sleep_and_snooze_refuse_bad_durations_and_work_only_in_a_job() -> None:
    with pytest.raises(RuntimeError, match=r"jobq.snooze\(\) is for a job's handle"):
        jobq.snooze(1)
    with pytest.raises(ValueError, match=r"jobq.sleep\(\) takes a finite number of seconds"):
        jobq.sleep(float("nan"))
    with pytest.raises(ValueError, match=r"sleep_until\(\) takes an aware datetime"):
        jobq.sleep_until(datetime(2030, 1, 1))


def test_jobq_show_lists_a_job_s_steps(
    queue: jobq.Queue, tmp_path: Path, capsys: pytest.CaptureFixture[str], dsn: str
) -> None:
    job_id = queue.enqueue(Steps(2, str(tmp_path / "journal")))
    assert queue.process_jobs(1) == 1
    logger = logging.getLogger("jobq")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    try:
        assert main(["show", str(job_id), "--json", "--dsn", dsn]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert main(["show", str(job_id), "--dsn", dsn]) == 0
        text = capsys.readouterr().out
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved
    assert [(s["name"], s["attempt"]) for s in shown["steps"]] == [("step-0", 1), ("step-1", 1)]
    assert all(s["size"] > 0 and s["recorded_at"] for s in shown["steps"])
    assert "step-0 (attempt 1, " in text


def ledger(queue: jobq.Queue) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in queue.backend.fetchall("SELECT * FROM ledger")]


@pytest.fixture
def with_ledger(queue: jobq.Queue) -> jobq.Queue:
    queue.backend.execute("CREATE TABLE ledger (job_id BIGINT NOT NULL, attempt INT NOT NULL)")
    return queue


def test_a_transactional_step_s_writes_commit_with_its_record_once(
    with_ledger: jobq.Queue, tmp_path: Path
) -> None:
    queue = with_ledger
    job_id = queue.enqueue(Ledger(str(tmp_path / "journal"), fail=True), retry=AGAIN)
    assert queue.process_jobs(2) == 2
    assert queue.wait(job_id, timeout=0).result == 1
    assert ledger(queue) == [(job_id, 1)]
    assert queue.backend.steps_of(job_id) == {"debit": "1"}


@pytest.mark.lease(0.5)
def test_a_transactional_step_whose_record_is_refused_leaves_none_of_its_writes(
    with_ledger: jobq.Queue, tmp_path: Path, dsn: str
) -> None:
    queue = with_ledger
    job_id = queue.enqueue(Ledger(str(tmp_path / "journal"), dsn, outlive=True), retry=AGAIN)
    first = queue.claim()
    assert first is not None
    assert queue.run(first) is jobq.Outcome.RETRIED
    # Attempt 1 wrote its row, then lost the job: the row went with the refused record.
    assert [e["attempt"] for e in entries(tmp_path / "journal")] == [1]
    assert ledger(queue) == []
    second = queue.claim()
    assert second is not None
    assert queue.run(second) is jobq.Outcome.COMPLETED
    assert ledger(queue) == [(job_id, 2)]


def test_a_transactional_step_is_refused_where_the_worker_shares_its_connection(
    queue: jobq.Queue,
) -> None:
    queue.enqueue(Twice())
    claim = queue.claim()
    assert claim is not None
    shared = cast(Backend, OneStatementAtATime(queue.backend, threading.Lock()))
    with queue._handling(claim, shared) as handling:
        jobq.step("debit", lambda connection: 1, transaction=True)
    assert isinstance(handling.error, RuntimeError)
    assert "under --concurrency" in str(handling.error)
    assert queue.backend.steps_of(claim.id) == {}


def test_a_drain_with_scheduled_jobs_runs_a_sleeping_job_past_its_sleep(
    queue: jobq.Queue, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    job_id = queue.enqueue(Sleeper(str(journal), 3600.0), retry=ONCE)
    drain(queue, with_scheduled=True)
    record = queue.wait(job_id, timeout=0)
    assert record.status is jobq.Status.COMPLETED
    assert record.result == [0, 1]
    assert [e["step"] for e in entries(journal)] == [0, 1]
