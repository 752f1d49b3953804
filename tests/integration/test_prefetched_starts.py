"""A batch's attempts on every database: only the first starts as it is claimed; each of the
others reads as claimed, not running, until it starts, and is recorded with its own start and
end, though none of them costs a statement of its own (issue 54, item 11)."""

from __future__ import annotations

import itertools
import time
from datetime import datetime, timedelta

import pytest

import jobq
from jobq.attempt_log import AttemptEntry
from jobq.backends.rows import ACK_PRECISION
from jobq.records import JobRecord

pytestmark = pytest.mark.lease(60)

# The coarsest step of a database's clock, SQLite's.
CLOCK_STEP = timedelta(milliseconds=1)


class Busy(jobq.Job):
    """Works a little while: long enough that the database's clock, in SQLite to the
    millisecond, tells one attempt's end from the next one's start, and that a batch of them
    is acknowledged with each attempt's own times (ACK_PRECISION)."""

    type = "busy"

    def handle(self) -> None:
        time.sleep(ACK_PRECISION + 0.01)


class Broken(Busy):
    type = "broken"
    retry = jobq.RetryPolicy(max_attempts=1)

    def handle(self) -> None:
        super().handle()
        raise RuntimeError("broken")


def record(queue: jobq.Queue, job_id: int) -> JobRecord:
    found = queue.get(job_id)
    assert found is not None
    return found


def same_moment(a: datetime | None, b: datetime | None) -> bool:
    """The history keeps moments as Unix seconds in JSON, a float, and SQLite's as a day
    number: the microseconds of a column's value may not survive the trip."""
    return a is not None and b is not None and abs(a - b) < CLOCK_STEP


def only_attempt(queue: jobq.Queue, job_id: int) -> AttemptEntry:
    (entry,) = record(queue, job_id).history
    return entry


def test_a_batch_starts_its_first_attempt_and_leaves_the_others_claimed(
    queue: jobq.Queue,
) -> None:
    queue.enqueue_many([Busy() for _ in range(3)])
    first, *queued = queue.claim_many(3, queued=True)
    running = record(queue, first.id)
    assert running.attempted_at is not None
    assert running.started_at == running.attempted_at
    assert not running.claimed_unstarted
    for claim in queued:
        waiting = record(queue, claim.id)
        assert waiting.status is jobq.Status.IN_PROGRESS
        assert (waiting.started_at, waiting.attempted_at) == (None, None)
        assert waiting.claimed_unstarted


def test_the_metrics_count_a_batch_s_unstarted_attempts_as_claimed_not_in_progress(
    queue: jobq.Queue,
) -> None:
    queue.enqueue_many([Busy() for _ in range(4)])
    queue.claim_many(3, queued=True)
    depth = queue._depth()
    assert (depth[("busy", "in_progress")], depth[("busy", "claimed")]) == (1, 2)
    assert depth[("busy", "pending")] == 1


def test_a_batch_run_at_once_starts_every_attempt_as_it_is_claimed(queue: jobq.Queue) -> None:
    # The concurrent worker's claims: nothing waits, so nothing reads as claimed.
    queue.enqueue_many([Busy() for _ in range(3)])
    for claim in queue.claim_many(3):
        running = record(queue, claim.id)
        assert running.attempted_at is not None
        assert not running.claimed_unstarted


def test_each_attempt_of_an_acknowledged_batch_has_its_own_start_and_end(
    queue: jobq.Queue,
) -> None:
    ids = queue.enqueue_many([Busy() for _ in range(3)])
    ran = [queue.run_unacknowledged(claim) for claim in queue.claim_many(3, queued=True)]
    completed = [claim for claim in ran if isinstance(claim, jobq.ClaimedJob)]
    outcomes, _ = queue.complete_many_and_claim(completed, 0)
    assert outcomes == [jobq.Outcome.COMPLETED] * 3
    entries = [only_attempt(queue, job_id) for job_id in ids]
    for job_id, entry in zip(ids, entries, strict=True):
        assert entry.started_at is not None
        assert entry.finished_at is not None
        assert entry.started_at < entry.finished_at
        done = record(queue, job_id)
        assert same_moment(done.started_at, entry.started_at)
        assert same_moment(done.attempted_at, entry.started_at)
        assert same_moment(done.finished_at, entry.finished_at)
    # One after another, as the worker ran them: none began before the one before it ended.
    for before, after in itertools.pairwise(entries):
        assert before.finished_at is not None
        assert after.started_at is not None
        assert before.finished_at <= after.started_at


def test_a_queued_attempt_that_fails_is_recorded_with_its_own_start(queue: jobq.Queue) -> None:
    first_id, failing_id = queue.enqueue_many([Busy(), Broken()])
    first, queued = queue.claim_many(2, queued=True)
    ran = queue.run_unacknowledged(first)
    assert queue.run_unacknowledged(queued) is jobq.Outcome.FAILED
    assert isinstance(ran, jobq.ClaimedJob)
    failed = only_attempt(queue, failing_id)
    assert failed.started_at is not None
    assert failed.finished_at is not None
    assert failed.started_at < failed.finished_at
    assert same_moment(record(queue, failing_id).started_at, failed.started_at)
    queue.complete_many_and_claim([ran], 0)
    ended = only_attempt(queue, first_id).finished_at
    # Recorded by two statements, each moment an age taken from the database's clock, so
    # each lands late by its statement's way to the server: a few milliseconds on a loaded
    # machine, well under a Busy job's run, which a shared end would add.
    assert ended is not None
    assert ended <= failed.started_at + timedelta(seconds=ACK_PRECISION / 2)


def test_a_released_claim_keeps_no_start(queue: jobq.Queue) -> None:
    queue.enqueue_many([Busy() for _ in range(2)])
    _, queued = queue.claim_many(2, queued=True)
    assert queue.release([(queued.id, queued.token)]) == {queued.id}
    released = record(queue, queued.id)
    assert (released.status, released.started_at, released.attempted_at) == (
        jobq.Status.PENDING,
        None,
        None,
    )


def test_a_renewal_round_records_the_start_of_a_queued_attempt_once(queue: jobq.Queue) -> None:
    # The master's round after a queued attempt started: the job reads as running before
    # its end, and a later round or the attempt's end keeps that start.
    queue.enqueue_many([Busy() for _ in range(3)])
    first, started, waiting = queue.claim_many(3, queued=True)
    held = [(claim.id, claim.token) for claim in (first, started, waiting)]
    assert queue._renewal_round(held, {started.id: 5.0}).extended == {
        c.id for c in (first, started, waiting)
    }
    running = record(queue, started.id)
    assert not running.claimed_unstarted
    assert running.attempted_at is not None
    assert running.started_at == running.attempted_at
    claimed_at = record(queue, first.id).attempted_at
    assert claimed_at is not None
    assert running.attempted_at < claimed_at  # 5 s before the claim
    assert record(queue, waiting.id).claimed_unstarted
    queue._renewal_round(held, {started.id: 1.0})
    assert record(queue, started.id).attempted_at == running.attempted_at
