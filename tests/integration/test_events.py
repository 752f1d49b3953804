"""Events: jobq.wait_for(key) suspends its job, holding no worker, until Queue.emit(key)
or its timeout; an event emitted before the wait is kept for it; the first emit wins; an
emit in the application's transaction rolls back with it; `jobq emit` emits. On the three
databases."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import jobq
from jobq.cli.commands import main
from tests.support import drivers
from tests.support.step_jobs import Waiter, entries, finished
from tests.support.waiting import wait_for

ONCE = jobq.RetryPolicy(max_attempts=1)


def suspended(queue: jobq.Queue, job_id: int) -> jobq.JobRecord:
    record = queue.get(job_id)
    assert record is not None
    assert record.status is jobq.Status.PENDING
    assert record.worker is None or record.lease_until is None
    return record


def test_an_event_emitted_before_the_wait_is_kept_for_it_and_the_first_emit_wins(
    queue: jobq.Queue, tmp_path: Path
) -> None:
    assert queue.emit("order-1:shipped", {"carrier": "post"}) is False
    assert queue.emit("order-1:shipped", {"carrier": "other"}) is False
    job_id = queue.enqueue(Waiter(str(tmp_path / "journal"), "order-1:shipped"), retry=ONCE)
    assert queue.process_jobs(1) == 1
    record = queue.wait(job_id, timeout=0)
    assert record.status is jobq.Status.COMPLETED
    assert record.result == {"carrier": "post"}


def test_a_wait_suspends_the_job_until_the_emit_wakes_it_uncounted(
    queue: jobq.Queue, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    job_id = queue.enqueue(Waiter(str(journal), "order-2:shipped"), retry=ONCE)
    assert queue.process_jobs(1) == 1
    record = suspended(queue, job_id)
    assert (record.last_error or "").startswith("Suspended: waiting for event 'order-2:shipped'")
    assert queue.process_jobs(1) == 0  # holds no worker, and is not due
    assert queue.awaited(job_id) == "order-2:shipped"
    assert queue.emit("order-2:shipped", [1, "two"]) is True
    assert queue.awaited(job_id) is None
    assert queue.process_jobs(1) == 1
    record = queue.wait(job_id, timeout=0)
    assert record.status is jobq.Status.COMPLETED
    assert record.result == [1, "two"]
    assert (record.attempts, record.retry.max_attempts) == (2, 2)
    assert [e["step"] for e in entries(journal)] == [0, 1]
    names = [step.name for step in queue.steps(job_id)]
    assert sorted(names) == ["after", "before", "jobq.wait-1"]


def test_a_wait_that_times_out_raises_and_a_later_emit_changes_nothing(
    queue: jobq.Queue, tmp_path: Path
) -> None:
    job_id = queue.enqueue(Waiter(str(tmp_path / "journal"), "late", timeout=0.5), retry=ONCE)
    assert queue.process_jobs(1) == 1
    suspended(queue, job_id)
    record = wait_for("the wait to time out", lambda: finished(queue, job_id))
    assert record.status is jobq.Status.COMPLETED
    assert record.result == "timed out"
    assert queue.emit("late", 1) is False  # nobody waits for it any more


def test_an_emit_in_the_application_s_transaction_rolls_back_with_it(
    queue: jobq.Queue, tmp_path: Path, dsn: str, db_kind: str
) -> None:
    job_id = queue.enqueue(Waiter(str(tmp_path / "journal"), "paid"), retry=ONCE)
    assert queue.process_jobs(1) == 1
    app = drivers.connect(dsn, db_kind, autocommit=False)
    try:
        assert queue.emit("paid", "rolled back", connection=app) is True
        app.rollback()
        assert queue.process_jobs(1) == 0
        suspended(queue, job_id)
        assert queue.emit("paid", "committed", connection=app) is True
        app.commit()
    finally:
        app.close()
    assert queue.process_jobs(1) == 1
    assert queue.wait(job_id, timeout=0).result == "committed"


def test_jobq_emit_emits_from_the_command_line(
    queue: jobq.Queue, tmp_path: Path, dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = queue.enqueue(Waiter(str(tmp_path / "journal"), "cli"), retry=ONCE)
    assert queue.process_jobs(1) == 1
    assert main(["show", str(job_id), "--json", "--dsn", dsn]) == 0
    assert json.loads(capsys.readouterr().out)["waits_for_event"] == "cli"
    assert main(["emit", "cli", "--payload", '{"n": 1}', "--dsn", dsn]) == 0
    assert "emitted 'cli'; a job was waiting for it" in capsys.readouterr().out
    assert main(["emit", "cli", "--payload", "{nope", "--dsn", dsn]) == 1
    assert "--payload is not JSON" in capsys.readouterr().err
    assert queue.process_jobs(1) == 1
    assert queue.wait(job_id, timeout=0).result == {"n": 1}


def test_wait_for_refuses_bad_keys_and_works_only_in_a_job() -> None:
    with pytest.raises(RuntimeError, match=r"jobq.wait_for\(\) is for a job's handle"):
        jobq.wait_for("k")


def test_an_emit_that_comes_while_the_waiting_attempt_ends_still_wakes_the_job(
    queue: jobq.Queue, tmp_path: Path, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = queue.enqueue(Waiter(str(tmp_path / "journal"), "between"), retry=ONCE)
    hold = queue.backend.hold_event

    def then_emitted(*args: Any) -> Any:
        # The job is marked, its attempt not yet suspended: the emit finds it in progress.
        state = hold(*args)
        with jobq.Queue.connect(dsn) as other:
            assert other.emit("between", "meanwhile") is True
        return state

    monkeypatch.setattr(queue.backend, "hold_event", then_emitted)
    assert queue.process_jobs(1) == 1
    monkeypatch.undo()
    assert queue.process_jobs(1) == 1  # due at once, not at its wait's end
    assert queue.wait(job_id, timeout=0).result == "meanwhile"


def test_an_async_queue_emits_as_the_queue_does(
    queue: jobq.Queue, tmp_path: Path, dsn: str
) -> None:
    job_id = queue.enqueue(Waiter(str(tmp_path / "journal"), "async"), retry=ONCE)
    assert queue.process_jobs(1) == 1

    async def emitted() -> tuple[bool, bool]:
        async with await jobq.AsyncQueue.connect(dsn) as aqueue:
            return await aqueue.emit("async", {"via": 1}), await aqueue.emit("async", 2)

    assert asyncio.run(emitted()) == (True, False)
    assert queue.process_jobs(1) == 1
    assert queue.wait(job_id, timeout=0).result == {"via": 1}
