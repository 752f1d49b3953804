"""An operator's controls through the Queue: priorities, jobs(), cancel, retry, pause."""

from __future__ import annotations

import os
import socket
import threading
from datetime import UTC, datetime, timedelta

import pytest

import jobq
from jobq.queue.controls import why_not_retried
from jobq.worker.plain import PlainWorker
from tests.support.jobs import Boom, Noop
from tests.support.waiting import wait_for

NOT_IDS: list[object] = ["1", -1, 0, 2**70, True, None, 1.0]


class CancelsItself(jobq.Job):
    """Cancels its own job from inside handle(), on a connection of its own, then reports
    what cancel_requested() says."""

    type = "cancels-itself"
    seen: list[bool] = []  # noqa: RUF012 - shared on purpose, reset by the test

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    def handle(self) -> None:
        claim = jobq.current_claim()
        assert claim is not None
        CancelsItself.seen.append(jobq.cancel_requested())
        with jobq.Queue.connect(self.dsn) as other:
            assert other.cancel(claim.id)
        CancelsItself.seen.append(jobq.cancel_requested())


class StopsWhenCancelled(jobq.Job):
    """Works until its job is cancelled, polling as job code that can stop early would."""

    type = "stops-when-cancelled"

    def handle(self) -> None:
        wait_for("the cancel", jobq.cancel_requested, timeout=30)


def claimed_ids(queue: jobq.Queue, types: list[str] | None = None) -> list[int]:
    ids = []
    while (claim := queue.claim(types)) is not None:
        ids.append(claim.id)
    return ids


def test_higher_priority_runs_first_then_in_schedule_order(queue: jobq.Queue) -> None:
    earlier = datetime.now(UTC) - timedelta(minutes=5)
    low = queue.enqueue(Noop(), priority=-3, scheduled_at=earlier)
    plain = queue.enqueue(Noop())
    first_urgent, second_urgent = queue.enqueue_many([Noop(), Noop()], priority=1000)
    old_plain = queue.enqueue(Noop(), scheduled_at=earlier)
    other_urgent = queue.enqueue(Noop(), type="other", priority=5)
    assert claimed_ids(queue, ["noop", "other"]) == [
        first_urgent,
        second_urgent,
        other_urgent,
        old_plain,
        plain,
        low,
    ]
    assert queue.get(first_urgent) is not None
    assert [queue.get(i).priority for i in (first_urgent, low)] == [1000, -3]  # type: ignore[union-attr]


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize("priority", [1001, -1001, 1.5, True, "1"])
def test_a_priority_out_of_range_is_refused_naming_it(queue: jobq.Queue, priority: object) -> None:
    with pytest.raises((TypeError, ValueError), match="priority"):
        queue.enqueue(Noop(), priority=priority)  # type: ignore[arg-type]
    with pytest.raises((TypeError, ValueError), match="priority"):
        queue.enqueue_many([Noop()], priority=priority)  # type: ignore[arg-type]
    assert queue.jobs() == []


def test_jobs_lists_newest_first_filtered_and_paged_by_id(queue: jobq.Queue) -> None:
    ids = queue.enqueue_many([Noop() for _ in range(5)])
    boom = queue.enqueue(Boom(), type="boom", retry=jobq.RetryPolicy(max_attempts=1))
    assert queue.process_jobs(1, type="boom") == 1
    assert [r.id for r in queue.jobs()] == [boom, *reversed(ids)]
    assert [r.id for r in queue.jobs(type="noop", limit=2)] == [ids[4], ids[3]]
    assert [r.id for r in queue.jobs(type="noop", limit=2, before_id=ids[3])] == [ids[2], ids[1]]
    assert [r.id for r in queue.jobs(status="failed")] == [boom]
    assert queue.jobs(status=jobq.Status.COMPLETED) == []


def test_filtered_jobs_merge_every_status_or_type_newest_first(queue: jobq.Queue) -> None:
    boom = queue.enqueue(Boom(), type="a", retry=jobq.RetryPolicy(max_attempts=1))
    assert queue.process_jobs(1, type="a") == 1
    ids = [queue.enqueue(Noop(), type=name) for name in ("a", "b", "c", "a", "b", "c")]
    assert [r.id for r in queue.jobs(status="pending")] == list(reversed(ids))
    paged = queue.jobs(status="pending", limit=3, before_id=ids[4])
    assert [r.id for r in paged] == [ids[3], ids[2], ids[1]]
    assert [r.id for r in queue.jobs(type="a")] == [ids[3], ids[0], boom]
    assert [r.id for r in queue.jobs(type="a", limit=1, before_id=ids[0])] == [boom]
    assert [r.id for r in queue.jobs(status="failed")] == [boom]
    assert queue.jobs(status="expired") == []
    assert queue.jobs(type="none") == []


def test_jobs_in_progress_are_listed_by_type_and_paged(queue: jobq.Queue) -> None:
    """On PostgreSQL they have no entries in the jobs index, and are read another way."""
    ids = [queue.enqueue(Noop(), type=name) for name in ("a", "b", "a", "a")]
    claimed = [queue.claim("a") for _ in range(2)]
    assert [c.id for c in claimed if c is not None] == [ids[0], ids[2]]
    assert [r.id for r in queue.jobs(status="in_progress")] == [ids[2], ids[0]]
    assert [r.id for r in queue.jobs(status="in_progress", type="a")] == [ids[2], ids[0]]
    paged = queue.jobs(status="in_progress", type="a", before_id=ids[2])
    assert [r.id for r in paged] == [ids[0]]
    assert queue.jobs(status="in_progress", type="b") == []
    assert [r.id for r in queue.jobs(type="a")] == [ids[3], ids[2], ids[0]]


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize(
    "arguments",
    [{"status": "done"}, {"limit": 0}, {"limit": "5"}, {"before_id": -1}, {"type": ""}],
)
def test_jobs_refuses_bad_arguments_naming_them(queue: jobq.Queue, arguments: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError, match=next(iter(arguments)).split("_")[0]):
        queue.jobs(**arguments)


def test_a_pending_job_is_cancelled_at_once_and_never_claimed(queue: jobq.Queue) -> None:
    job = queue.enqueue(Noop())
    assert queue.cancel(job)
    record = queue.get(job)
    assert record is not None and record.status == "cancelled" and record.finished_at is not None
    assert queue.claim() is None
    assert not queue.cancel(job)  # finished already


def test_unknown_ids_and_finished_jobs_are_not_cancelled_or_retried(queue: jobq.Queue) -> None:
    done = queue.enqueue(Noop())
    queue.process_jobs(1)
    for job_id in [*NOT_IDS, done + 1000]:
        assert queue.cancel(job_id) is False  # type: ignore[arg-type]
        assert queue.retry(job_id) is False  # type: ignore[arg-type]
    assert queue.cancel(done) is False
    assert queue.retry(done) is False
    assert "completed" in why_not_retried(done, queue.get(done))
    assert "no job" in why_not_retried(done + 1000, queue.get(done + 1000))


def test_a_running_job_cancelled_ends_cancelled_when_its_attempt_ends(queue: jobq.Queue) -> None:
    job = queue.enqueue(Noop())
    claim = queue.claim()
    assert claim is not None
    record = queue.get(job)
    assert record is not None
    assert (record.host, record.pid) == (socket.gethostname(), os.getpid())
    assert queue.cancel(job) and queue.cancel(job)  # asking twice is the same request
    # The renewal round tells the supervisor, and keeps the lease while it stops the worker.
    assert queue._renewal_round([(claim.id, claim.token)]) == ({job}, {job})
    assert queue.run(claim) is jobq.Outcome.CANCELLED
    record = queue.get(job)
    assert record is not None and record.status == "cancelled"
    assert record.last_error is not None and "after the cancel" in record.last_error
    assert (record.host, record.pid) == (None, None)
    assert queue.claim() is None  # not retried


def test_a_failure_after_a_cancel_is_not_retried(queue: jobq.Queue) -> None:
    job = queue.enqueue(Boom())
    claim = queue.claim()
    assert claim is not None and queue.cancel(job)
    assert queue.run(claim) is jobq.Outcome.CANCELLED
    assert queue.counts() == {"cancelled": 1}


def test_an_acknowledgement_before_the_cancel_wins(queue: jobq.Queue) -> None:
    job = queue.enqueue(Noop())
    claim = queue.claim()
    assert claim is not None
    assert queue.run(claim) is jobq.Outcome.COMPLETED
    assert queue.cancel(job) is False
    record = queue.get(job)
    assert record is not None and record.status == "completed"
    assert record.cancel_requested_at is None


def test_job_code_sees_its_cancel_and_the_attempt_ends_cancelled(
    queue: jobq.Queue, dsn: str
) -> None:
    CancelsItself.seen.clear()
    job = queue.enqueue(CancelsItself(dsn))
    assert queue.process_jobs(1) == 1
    assert CancelsItself.seen == [False, True]
    assert queue.counts() == {"cancelled": 1}
    with pytest.raises(RuntimeError, match="handle"):
        jobq.cancel_requested()
    assert queue.get(job) is not None


def test_retry_gives_a_finished_job_one_more_attempt_now(queue: jobq.Queue) -> None:
    failed = queue.enqueue(Boom(), retry=jobq.RetryPolicy(max_attempts=1))
    cancelled = queue.enqueue(Noop(), type="later")
    queue.process_jobs(1, type="boom")
    assert queue.cancel(cancelled)
    assert queue.retry(failed) and queue.retry(cancelled)
    assert not queue.retry(failed)  # pending now
    claim = queue.claim("boom")
    assert claim is not None and (claim.id, claim.attempt) == (failed, 2)
    record = queue.get(cancelled)
    assert record is not None and record.status == "pending" and record.finished_at is None


def test_retry_past_the_deadline_is_refused_with_the_reason(queue: jobq.Queue) -> None:
    job = queue.enqueue(Noop(), deadline=datetime.now(UTC) + timedelta(milliseconds=300))
    assert queue.cancel(job)
    past = datetime.now(UTC) + timedelta(seconds=1)
    while datetime.now(UTC) < past:  # the deadline is the database's, a moment away
        if not queue.retry(job):
            break
        queue.cancel(job)
    assert queue.retry(job) is False
    assert "deadline passed" in why_not_retried(job, queue.get(job))


def test_a_paused_type_is_not_claimed_until_resumed(queue: jobq.Queue) -> None:
    held = queue.enqueue(Noop(), type="held", priority=10)
    other = queue.enqueue(Noop(), type="other")
    assert queue.pause("held") and not queue.pause("held")
    assert queue.paused() == {"held"}
    assert queue.claim("held") is None
    claim = queue.claim(["held", "other"])
    assert claim is not None and claim.id == other  # though held has the higher priority
    assert queue.claim() is None  # any type: the paused one is skipped
    assert queue.resume("held") and not queue.resume("held")
    assert queue.paused() == set()
    claim = queue.claim()
    assert claim is not None and claim.id == held


def test_an_acknowledgement_claims_no_paused_job(queue: jobq.Queue) -> None:
    first = queue.enqueue(Noop())
    queue.enqueue(Noop())
    claim = queue.claim()
    assert claim is not None and claim.id == first
    queue.pause("noop")
    done, then = queue.complete_and_claim(claim, "noop")
    assert done and then is None


def test_jobq_work_ends_a_cancelled_job_cancelled_and_goes_on(queue: jobq.Queue, dsn: str) -> None:
    cancelled = queue.enqueue(StopsWhenCancelled())
    after = queue.enqueue(Noop())
    with jobq.Queue.connect(dsn) as own:
        worker = PlainWorker(own, (), poll_interval=0.05)
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            wait_for("the job to start", lambda: queue.counts().get("in_progress") == 1)
            assert queue.cancel(cancelled)
            wait_for("the next job to run", lambda: queue.counts().get("completed") == 1)
        finally:
            worker.stopping.set()
            thread.join(30)
    record = queue.get(cancelled)
    assert record is not None and (record.status, record.attempts) == ("cancelled", 1)
    assert queue.get(after) is not None and queue.counts() == {"cancelled": 1, "completed": 1}
