"""Claims, acknowledgements, leases, renewals and maintenance, on every database."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta

import pytest

import jobq
from jobq.backends.base import Backend
from jobq.backends.rows import Runner
from jobq.outcomes import LEASE_EXPIRED_BEFORE_START
from tests.support.jobs import Boom, Noop, Record
from tests.support.waiting import wait_for, wait_lease_ended

NO_WAIT = jobq.RetryPolicy(max_attempts=3, backoff=0)

OpenQueue = Callable[..., jobq.Queue]


@pytest.fixture
def open_queue(dsn: str) -> Iterator[OpenQueue]:
    """Opens queues on the test's database (installed), closing them afterwards."""
    opened: list[jobq.Queue] = []

    def open_queue(lease: float = 60, **kwargs: object) -> jobq.Queue:
        queue = jobq.Queue.connect(dsn, lease_duration=lease, **kwargs)  # type: ignore[arg-type]
        opened.append(queue)
        queue.install()
        return queue

    yield open_queue
    for queue in opened:
        queue.close()


@pytest.fixture
def queue(open_queue: OpenQueue) -> jobq.Queue:
    return open_queue()


@pytest.fixture(autouse=True)
def fresh_record() -> None:
    Record.seen.clear()


def claim_one(queue: jobq.Queue, job_type: str | Sequence[str] | None = None) -> jobq.ClaimedJob:
    claim = queue.claim(job_type)
    assert claim is not None
    return claim


# -- claims ---------------------------------------------------------------------------------


def test_a_claim_is_one_attempt_with_its_own_token_and_lease(queue: jobq.Queue) -> None:
    job_id = queue.enqueue(Record(1))
    claim = claim_one(queue)
    assert (claim.id, claim.type, claim.attempt) == (job_id, "record", 1)
    assert claim.class_name == Record.job_name
    assert re.fullmatch(r"[0-9a-f]{32}", claim.token)
    record = queue.get(job_id)
    assert record is not None
    assert record.status is jobq.Status.IN_PROGRESS
    assert record.attempts == 1
    assert record.lease_until == claim.lease_until
    assert timedelta(seconds=59) < claim.lease_until - record.updated_at <= timedelta(seconds=60)
    assert queue.claim() is None, "a claimed job is not ready for anyone else"


def test_install_is_idempotent(queue: jobq.Queue) -> None:
    queue.enqueue(Noop())
    version = len(type(queue.backend).migrations)
    assert queue.install() == (version, version)
    assert queue.counts() == {"pending": 1}


def test_install_says_what_it_did(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with jobq.Queue.connect(dsn) as queue:
        backend = queue.backend
        known = type(backend).migrations
        assert queue.install() == (0, len(known))
        # One migration more than the database has: an upgrade by one version.
        upgrade = [*known, ["CREATE TABLE jobq_test_upgrade (x INTEGER)"]]
        monkeypatch.setattr(backend, "migrations", upgrade)
        assert queue.install() == (len(known), len(known) + 1)
        assert queue.install() == (len(known) + 1, len(known) + 1)


def test_a_job_class_of_the_running_script_is_refused_at_enqueue(queue: jobq.Queue) -> None:
    # What `class Plain(jobq.Job)` in a script run as `python script.py` makes.
    script_class = type("Plain", (jobq.Job,), {"__module__": "__main__", "handle": print})
    with pytest.raises(TypeError, match=r"Plain is defined in the script being run .*--app"):
        queue.enqueue(script_class())
    assert queue.counts() == {}


def test_claims_follow_schedule_order_and_type(queue: jobq.Queue) -> None:
    first = queue.enqueue(Record("a"))
    email = queue.enqueue(Record("b"), type="email")
    earlier = queue.enqueue(
        Record("c"), scheduled_at=datetime.now(UTC) - timedelta(minutes=5), type="sms"
    )
    assert claim_one(queue, "email").id == email
    assert queue.claim(["nothing", "here"]) is None
    assert claim_one(queue, ["record", "sms"]).id == earlier
    assert claim_one(queue).id == first
    assert queue.claim() is None


def test_a_job_is_not_ready_before_its_time(queue: jobq.Queue) -> None:
    queue.enqueue(Noop(), delay=60)
    queue.enqueue(Noop(), scheduled_at=datetime.now(UTC) + timedelta(hours=1))
    assert queue.claim() is None
    assert queue.counts() == {"pending": 2}


def test_enqueue_rejects_bad_arguments(queue: jobq.Queue) -> None:
    with pytest.raises(ValueError, match="either delay or scheduled_at"):
        queue.enqueue(Noop(), delay=1, scheduled_at=datetime.now(UTC))
    with pytest.raises(ValueError, match="timezone-aware"):
        queue.enqueue(Noop(), scheduled_at=datetime.now())
    with pytest.raises(ValueError, match="delay"):
        queue.enqueue(Noop(), delay=-1)
    with pytest.raises(ValueError, match="job type"):
        queue.enqueue(Noop(), type="")
    with pytest.raises(TypeError, match=r"jobq\.Job"):
        queue.enqueue("not a job")  # type: ignore[arg-type]
    assert queue.counts() == {}


# -- acknowledgements -----------------------------------------------------------------------


def test_acks_need_the_attempts_token(queue: jobq.Queue) -> None:
    job_id = queue.enqueue(Noop())
    claim = claim_one(queue)
    impostor = jobq.ClaimedJob(**{**claim.__dict__, "token": "0" * 32})
    assert queue.complete(impostor) is False
    assert queue.fail(impostor, "not mine") is False
    assert queue.renew(impostor) is None
    assert queue.complete(claim) is True
    record = queue.get(job_id)
    assert record is not None
    assert record.status is jobq.Status.COMPLETED
    assert record.finished_at is not None
    assert record.lease_until is None
    assert queue.complete(claim) is False, "an attempt completes once"


def test_complete_and_claim_acknowledges_and_claims_the_next_job(queue: jobq.Queue) -> None:
    first, second = queue.enqueue(Noop()), queue.enqueue(Noop())
    claim = claim_one(queue)
    before = time.monotonic()
    done, following = queue.complete_and_claim(claim)
    assert done is True
    assert following is not None
    assert (following.id, following.attempt) == (second, 1)
    assert following.token != claim.token
    assert re.fullmatch(r"[0-9a-f]{32}", following.token)
    assert before + 59 < following.expires_monotonic <= time.monotonic() + 60
    statuses = {
        job_id: record.status for job_id in (first, second) if (record := queue.get(job_id))
    }
    assert statuses == {first: jobq.Status.COMPLETED, second: jobq.Status.IN_PROGRESS}
    record = queue.get(second)
    assert record is not None
    assert record.lease_until == following.lease_until
    assert queue.complete_and_claim(following) == (True, None), "nothing left to claim"
    assert queue.counts() == {"completed": 2}


def test_complete_and_claim_claims_even_when_the_attempt_had_lost_the_job(
    queue: jobq.Queue,
) -> None:
    queue.enqueue(Noop())
    claim = claim_one(queue)
    assert queue.complete(claim) is True
    email = queue.enqueue(Noop(), type="email")
    queue.enqueue(Noop(), type="other")
    done, following = queue.complete_and_claim(claim, "email")
    assert done is False, "an attempt completes once"
    assert following is not None, "the claim keeps to its types"
    assert following.id == email, "the claim keeps to its types"
    assert queue.counts() == {"completed": 1, "in_progress": 1, "pending": 1}


@pytest.mark.databases("postgresql")
def test_the_fused_statement_does_what_one_transaction_of_both_statements_does(
    queue: jobq.Queue,
) -> None:
    backend = queue.backend
    for _ in range(3):
        queue.enqueue(Noop())
    claim = claim_one(queue)
    here = Runner("host", 1, "worker-1")
    fused = backend.complete_and_claim(claim.id, claim.token, (), "a" * 32, 60.0, here)
    assert fused[1] is not None
    generic = Backend.complete_and_claim(backend, fused[1].id, "a" * 32, (), "b" * 32, 60.0, here)
    assert generic[1] is not None
    assert (fused[0], generic[0]) == (True, True)
    assert (generic[1].id, generic[1].attempt) == (fused[1].id + 1, 1)
    assert queue.counts() == {"completed": 2, "in_progress": 1}


def test_run_and_claim_chains_completed_jobs_only(queue: jobq.Queue) -> None:
    queue.enqueue(Record(1))
    queue.enqueue(Boom(), retry=NO_WAIT)
    queue.enqueue(Record(2))
    queue.enqueue(Record(3))
    outcome, following = queue.run_and_claim(claim_one(queue))
    assert outcome is jobq.Outcome.COMPLETED
    assert following is not None
    outcome, after_failure = queue.run_and_claim(following)
    assert (outcome, after_failure) == (jobq.Outcome.RETRIED, None), "a failure claims nothing"
    asked: list[str] = []

    def no_more() -> bool:
        asked.append("asked")
        return False

    outcome, none = queue.run_and_claim(claim_one(queue), more=no_more)
    assert (outcome, none, asked) == (jobq.Outcome.COMPLETED, None, ["asked"])
    assert Record.seen == [1, 2]
    assert queue.counts() == {"completed": 2, "pending": 2}


def test_fail_requeues_after_the_policys_backoff(queue: jobq.Queue) -> None:
    policy = jobq.RetryPolicy(max_attempts=3, backoff=30, jitter=False)
    job_id = queue.enqueue(Noop(), retry=policy)
    assert queue.fail(claim_one(queue), RuntimeError("disk full")) is True
    record = queue.get(job_id)
    assert record is not None
    assert (record.status, record.attempts) == (jobq.Status.PENDING, 1)
    assert record.last_error is not None
    assert "RuntimeError: disk full" in record.last_error
    waited = (record.scheduled_at - record.updated_at).total_seconds()
    assert waited == pytest.approx(30, abs=0.01)
    assert queue.claim() is None, "the retry waits for its backoff"


def test_fail_without_attempts_left_fails_the_job(queue: jobq.Queue) -> None:
    job_id = queue.enqueue(Noop(), retry=jobq.RetryPolicy(max_attempts=2, backoff=0))
    assert queue.fail(claim_one(queue), "first") is True
    second = claim_one(queue)
    assert second.attempt == 2
    assert queue.fail(second, "second") is True
    record = queue.get(job_id)
    assert record is not None
    assert (record.status, record.attempts, record.last_error) == (jobq.Status.FAILED, 2, "second")
    assert record.finished_at is not None
    assert queue.claim() is None


def test_a_retry_that_could_only_start_after_the_deadline_expires_the_job(
    queue: jobq.Queue,
) -> None:
    policy = jobq.RetryPolicy(max_attempts=5, backoff=600, jitter=False)
    job_id = queue.enqueue(Noop(), retry=policy, deadline=timedelta(minutes=1))
    assert queue.fail(claim_one(queue), "slow upstream") is True
    record = queue.get(job_id)
    assert record is not None
    assert record.status is jobq.Status.EXPIRED


# -- late acknowledgements and maintenance --------------------------------------------------


def test_a_late_ack_lands_while_maintenance_has_not_recovered_the_job(
    open_queue: OpenQueue,
) -> None:
    queue = open_queue(lease=0.2)
    job_id = queue.enqueue(Noop())
    claim = claim_one(queue)
    wait_lease_ended(queue, job_id)
    assert queue.renew(claim) is None, "an ended lease is never revived"
    assert queue.complete(claim) is True
    record = queue.get(job_id)
    assert record is not None
    assert record.status is jobq.Status.COMPLETED


def test_after_recovery_the_old_attempt_cannot_touch_the_job(
    open_queue: OpenQueue, caplog: pytest.LogCaptureFixture
) -> None:
    queue = open_queue(lease=0.2)
    job_id = queue.enqueue(Noop(), retry=NO_WAIT)
    old = claim_one(queue)
    wait_lease_ended(queue, job_id)
    assert queue.run_maintenance() == {"requeued": 1, "failed": 0, "expired": 0}
    new = claim_one(queue)
    assert (new.id, new.attempt) == (job_id, 2)
    assert new.token != old.token
    with caplog.at_level(logging.WARNING, logger="jobq"):
        assert queue.complete(old) is False
        assert queue.fail(old, "too late") is False
    messages = [record.getMessage() for record in caplog.records]
    assert "Job ownership lost before completion" in messages
    assert "Job ownership lost before failure" in messages
    record = queue.get(job_id)
    assert record is not None
    assert (record.status, record.attempts) == (jobq.Status.IN_PROGRESS, 2)
    assert queue.complete(new) is True


def test_maintenance_recovers_by_each_jobs_policy(open_queue: OpenQueue) -> None:
    queue = open_queue(lease=0.2)
    once = queue.enqueue(Noop(), retry=jobq.RetryPolicy(max_attempts=1))
    twice = queue.enqueue(Noop(), retry=NO_WAIT)
    late = queue.enqueue(Noop(), retry=NO_WAIT, deadline=timedelta(seconds=0.5))
    claims = [claim_one(queue) for _ in range(3)]
    for claim in claims:
        wait_lease_ended(queue, claim.id)
    deadline = queue.get(late).deadline  # type: ignore[union-attr]
    assert deadline is not None
    # The database's clock is this machine's: waiting on it is waiting for the deadline.
    wait_for("the deadline to pass", lambda: datetime.now(UTC) > deadline + timedelta(seconds=0.05))
    assert queue.run_maintenance() == {"requeued": 1, "failed": 1, "expired": 1}
    statuses = {job_id: queue.get(job_id).status for job_id in (once, twice, late)}  # type: ignore[union-attr]
    assert statuses == {
        once: jobq.Status.FAILED,
        twice: jobq.Status.PENDING,
        late: jobq.Status.EXPIRED,
    }
    record = queue.get(once)
    assert record is not None, "the abandoned attempt counts"
    assert record.attempts == 1, "the abandoned attempt counts"
    assert queue.run_maintenance() == {"requeued": 0, "failed": 0, "expired": 0}


def test_recovery_waits_for_the_backoff(open_queue: OpenQueue) -> None:
    queue = open_queue(lease=0.2)
    job_id = queue.enqueue(Noop(), retry=jobq.RetryPolicy(backoff=45, jitter=False))
    claim_one(queue)
    wait_lease_ended(queue, job_id)
    assert queue.run_maintenance()["requeued"] == 1
    record = queue.get(job_id)
    assert record is not None
    assert (record.scheduled_at - record.updated_at).total_seconds() == pytest.approx(45, abs=0.01)
    assert queue.claim() is None


def test_maintenance_expires_pending_jobs_past_their_deadline(queue: jobq.Queue) -> None:
    job_id = queue.enqueue(Noop(), deadline=datetime.now(UTC) - timedelta(minutes=1))
    keep = queue.enqueue(Noop(), deadline=timedelta(hours=1))
    assert queue.claim(["nothing"]) is None
    assert queue.run_maintenance() == {"requeued": 0, "failed": 0, "expired": 1}
    record = queue.get(job_id)
    assert record is not None
    assert record.status is jobq.Status.EXPIRED
    assert claim_one(queue).id == keep


# -- renewals -------------------------------------------------------------------------------


def test_renew_extends_with_the_same_token(open_queue: OpenQueue) -> None:
    queue = open_queue(lease=5)
    queue.enqueue(Noop())
    claim = claim_one(queue)
    renewed = queue.renew(claim)
    assert renewed is not None
    assert renewed.token == claim.token
    assert renewed.lease_until >= claim.lease_until
    assert renewed.expires_monotonic > claim.expires_monotonic
    assert queue.complete(renewed) is True
    assert queue.renew(renewed) is None, "a finished attempt has no lease to renew"


def test_renew_never_shortens_a_lease(open_queue: OpenQueue) -> None:
    long_queue, short_queue = open_queue(lease=600), open_queue(lease=5)
    long_queue.enqueue(Noop())
    claim = claim_one(long_queue)
    renewed = short_queue.renew(claim)
    assert renewed is not None
    assert renewed.lease_until == claim.lease_until


# -- running claims -------------------------------------------------------------------------


def test_process_jobs_counts_attempts_and_validates_its_limit(queue: jobq.Queue) -> None:
    for value in range(3):
        queue.enqueue(Record(value))
    queue.enqueue(Boom(), retry=jobq.RetryPolicy(max_attempts=1))
    assert queue.process_jobs(0) == 0
    with pytest.raises(ValueError, match="negative"):
        queue.process_jobs(-1)
    assert queue.process_jobs(2) == 2
    assert queue.counts() == {"completed": 2, "pending": 2}, "no claim beyond the limit"
    assert queue.process_jobs(10) == 2, "the failed attempt counts"
    assert Record.seen == [0, 1, 2]
    assert queue.counts() == {"completed": 3, "failed": 1}
    assert queue.process_next() is False


def test_process_jobs_filters_by_type(queue: jobq.Queue) -> None:
    queue.enqueue(Record("email"), type="email")
    queue.enqueue(Record("other"))
    assert queue.process_jobs(10, type="email") == 1
    assert Record.seen == ["email"]
    assert queue.process_next("email") is False


class Peek(jobq.Job):
    """Records the counts its queue shows while it runs."""

    type = "peek"
    dsn = ""
    during: list[dict[str, int]] = []  # noqa: RUF012

    def handle(self) -> None:
        with jobq.Queue.connect(Peek.dsn) as other:
            Peek.during.append(other.counts())


def test_each_job_is_claimed_right_before_it_runs(queue: jobq.Queue, dsn: str) -> None:
    Peek.dsn, Peek.during = dsn, []
    for _ in range(3):
        queue.enqueue(Peek())
    assert queue.process_jobs(3) == 3
    assert Peek.during == [
        {"in_progress": 1, "pending": 2},
        {"completed": 1, "in_progress": 1, "pending": 1},
        {"completed": 2, "in_progress": 1},
    ]


class Order(jobq.Listener):
    def __init__(self) -> None:
        self.events: list[str] = []

    def on_claimed(self, claim: jobq.ClaimedJob) -> None:
        self.events.append("claimed")

    def on_completed(self, claim: jobq.ClaimedJob) -> None:
        self.events.append("completed")

    def on_failed(self, claim: jobq.ClaimedJob, error: BaseException | str) -> None:
        self.events.append(f"failed: {error}")


def test_listener_sees_claim_then_outcome(open_queue: OpenQueue) -> None:
    listener = Order()
    queue = open_queue(listener=listener)
    queue.enqueue(Record(1))
    queue.enqueue(Boom("bad"))
    assert queue.process_jobs(2) == 2
    assert listener.events == ["claimed", "completed", "claimed", "failed: bad"]
    assert Record.seen == [1]


class SlowListener(jobq.Listener):
    """Uses up the whole lease before the job can start."""

    def on_claimed(self, claim: jobq.ClaimedJob) -> None:
        wait_for("the local lease to run out", lambda: time.monotonic() >= claim.expires_monotonic)


def test_a_lease_that_ended_before_handle_fails_the_attempt(open_queue: OpenQueue) -> None:
    queue = open_queue(lease=0.3, listener=SlowListener())
    job_id = queue.enqueue(Record("never"), retry=jobq.RetryPolicy(max_attempts=1))
    assert queue.process_jobs(1) == 1
    assert Record.seen == []
    record = queue.get(job_id)
    assert record is not None
    assert (record.status, record.last_error) == (jobq.Status.FAILED, LEASE_EXPIRED_BEFORE_START)


class Exit(jobq.Job):
    type = "exit"

    def handle(self) -> None:
        raise SystemExit(3)


def test_a_base_exception_fails_the_attempt_then_propagates(queue: jobq.Queue) -> None:
    job_id = queue.enqueue(Exit(), retry=jobq.RetryPolicy(max_attempts=1))
    with pytest.raises(SystemExit):
        queue.process_next()
    record = queue.get(job_id)
    assert record is not None
    assert record.status is jobq.Status.FAILED
    assert record.last_error is not None
    assert "SystemExit: 3" in record.last_error


def test_prune_deletes_only_old_finished_jobs(queue: jobq.Queue) -> None:
    done = queue.enqueue(Noop())
    waiting = queue.enqueue(Noop(), delay=3600)
    assert queue.process_jobs(5) == 1
    assert queue.prune(older_than=3600) == 0
    wait_for("the finished job to be prunable", lambda: queue.prune(older_than=0) == 1)
    assert queue.get(done) is None
    assert queue.get(waiting) is not None
    assert queue.get(10**9) is None


def test_renew_many_extends_only_leases_still_held(open_queue: OpenQueue) -> None:
    # Only the lease that must run out is short: a loaded machine may take longer than it
    # between two statements, and the other claims must still be held when renewed.
    short, long_queue = open_queue(lease=0.3), open_queue(lease=60)
    for _ in range(4):
        long_queue.enqueue(Noop(), retry=NO_WAIT)
    held, done, taken = (claim_one(long_queue) for _ in range(3))
    ended = claim_one(short)
    assert long_queue.renew_many([]) == set()
    assert long_queue.renew_many([(held.id, held.token)]) == {held.id}
    wait_lease_ended(short, ended.id)
    assert long_queue.complete(done) is True
    impostor = (taken.id, "f" * 32)
    pairs = [(c.id, c.token) for c in (held, ended, done)] + [impostor]
    assert long_queue.renew_many(pairs) == {held.id}
    record = long_queue.get(ended.id)
    assert record is not None
    assert record.lease_until is not None
    assert record.lease_until < long_queue.get(held.id).lease_until  # type: ignore[union-attr, operator]


def test_an_error_text_the_database_cannot_store_still_fails_the_attempt(
    queue: jobq.Queue,
) -> None:
    job_id = queue.enqueue(Boom("nul \x00 and a lone surrogate \udc80"), retry=NO_WAIT)
    assert queue.process_next() is True
    record = queue.get(job_id)
    assert record is not None
    assert record.status is jobq.Status.PENDING
    assert record.last_error is not None
    assert "nul \\x00 and a lone surrogate" in record.last_error


def test_run_reports_how_each_attempt_ended(open_queue: OpenQueue) -> None:
    queue = open_queue(lease=1)
    queue.enqueue(Record(1))
    queue.enqueue(Boom(), retry=jobq.RetryPolicy(max_attempts=2, backoff=0))
    queue.enqueue(Boom(), retry=jobq.RetryPolicy(max_attempts=1))
    queue.enqueue(Boom(), retry=jobq.RetryPolicy(backoff=3600, jitter=False), deadline=60)
    outcomes = [queue.run(claim_one(queue)) for _ in range(4)]
    assert outcomes == [
        jobq.Outcome.COMPLETED,
        jobq.Outcome.RETRIED,
        jobq.Outcome.FAILED,
        jobq.Outcome.EXPIRED,
    ]
    queue.enqueue(Record(2))
    stale = claim_one(queue)
    wait_lease_ended(queue, stale.id)
    queue.run_maintenance()
    assert queue.run(stale) is jobq.Outcome.LOST


def test_oldest_ready_counts_only_jobs_that_could_run(queue: jobq.Queue) -> None:
    queue.enqueue(Noop(), scheduled_at=datetime.now(UTC) - timedelta(minutes=10))
    queue.enqueue(Noop())
    queue.enqueue(Noop(), type="later", delay=600)
    queue.enqueue(Noop(), type="too-late", deadline=datetime.now(UTC) - timedelta(seconds=1))
    ages = queue.oldest_ready()
    assert set(ages) == {"noop"}
    assert 599 < ages["noop"] < 900


def test_oldest_ready_is_the_oldest_of_every_priority(queue: jobq.Queue) -> None:
    now = datetime.now(UTC)
    # The oldest ready job of `noop` has the lowest priority; a delayed one has the highest.
    queue.enqueue(Noop(), scheduled_at=now - timedelta(minutes=1), priority=7)
    queue.enqueue(Noop(), scheduled_at=now - timedelta(minutes=20), priority=-5)
    queue.enqueue(Noop(), scheduled_at=now - timedelta(minutes=5))
    queue.enqueue(Noop(), delay=600, priority=1000)
    # Of `other`, the only ready job is below a priority whose jobs are all delayed.
    queue.enqueue(Noop(), type="other", delay=600, priority=3)
    queue.enqueue(Noop(), type="other", scheduled_at=now - timedelta(minutes=2), priority=-1000)
    ages = queue.oldest_ready()
    assert set(ages) == {"noop", "other"}
    assert 20 * 60 - 1 < ages["noop"] < 25 * 60
    assert 2 * 60 - 1 < ages["other"] < 7 * 60
