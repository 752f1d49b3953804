"""Batched claims on every database: up to N jobs in one claim, each its own attempt with its
own token and lease, picked as single claims pick; acknowledged together with the next batch;
and the release of jobs claimed but never started, back to pending at once, uncounted."""

from __future__ import annotations

import dataclasses
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import jobq
from jobq.records import JobRecord
from tests.support.jobs import Noop, Record

CLAIMERS = 4
JOBS = 120
# A claimer thread that has not finished by then has hung: the test fails rather than waits.
JOIN_TIMEOUT = 120.0


pytestmark = pytest.mark.lease(60)


def record(queue: jobq.Queue, job_id: int) -> JobRecord:
    found = queue.get(job_id)
    assert found is not None
    return found


def token_of(queue: jobq.Queue, job_id: int) -> Any:
    mark = queue.backend.placeholder.format("id")
    return queue.backend.fetchone(f"SELECT token FROM jobq_jobs WHERE id = {mark}", {"id": job_id})[
        0
    ]


def test_a_batched_claim_takes_distinct_jobs_each_its_own_attempt(queue: jobq.Queue) -> None:
    ids = queue.enqueue_many([Record(i) for i in range(5)])
    claims = queue.claim_many(3)
    assert [claim.id for claim in claims] == ids[:3]
    assert len({claim.token for claim in claims}) == 3
    for claim in claims:
        row = record(queue, claim.id)
        assert (row.status, row.attempts, claim.attempt) == (jobq.Status.IN_PROGRESS, 1, 1)
        assert row.lease_until == claim.lease_until
        assert token_of(queue, claim.id) == claim.token
    assert [claim.id for claim in queue.claim_many(5)] == ids[3:]
    assert queue.claim_many(5) == []


def test_a_batched_claim_takes_higher_priorities_first_and_no_paused_type(
    queue: jobq.Queue,
) -> None:
    earlier = datetime.now(UTC) - timedelta(minutes=1)
    low = queue.enqueue_many([Noop() for _ in range(2)], type="a", scheduled_at=earlier)
    high = queue.enqueue_many([Noop() for _ in range(2)], type="b", priority=5)
    queue.enqueue_many([Noop() for _ in range(2)], type="held", priority=9)
    queue.pause("held")
    assert [claim.id for claim in queue.claim_many(10)] == high + low
    assert queue.claim_many(10, type=["held", "a"]) == []


def test_the_batch_claimed_with_an_acknowledgement_keeps_priorities_and_pauses(
    queue: jobq.Queue,
) -> None:
    # What a prefetching worker does after each batch: the next claim rides on the
    # acknowledgement, and must pick exactly as a claim of its own would.
    queue.enqueue(Noop(), type="a")
    (done,) = queue.claim_many(1)
    earlier = datetime.now(UTC) - timedelta(minutes=1)
    low = queue.enqueue_many([Noop() for _ in range(2)], type="a", scheduled_at=earlier)
    high = queue.enqueue_many([Noop() for _ in range(2)], type="b", priority=5)
    queue.enqueue_many([Noop() for _ in range(2)], type="held", priority=9)
    queue.pause("held")
    outcomes, claims = queue.complete_many_and_claim([done], 10)
    assert outcomes == [jobq.Outcome.COMPLETED]
    assert [claim.id for claim in claims] == high + low
    assert queue.complete_many_and_claim(claims, 10, type=["held", "a"]) == (
        [jobq.Outcome.COMPLETED] * 4,
        [],
    )


def test_a_batched_claim_by_type_takes_only_those_types(queue: jobq.Queue) -> None:
    wanted = queue.enqueue_many([Noop() for _ in range(3)], type="a")
    queue.enqueue_many([Noop() for _ in range(3)], type="other")
    assert [claim.id for claim in queue.claim_many(10, type=["a", "missing"])] == wanted


def test_the_acknowledgement_applies_per_token_and_claims_the_next_batch(
    queue: jobq.Queue,
) -> None:
    ids = queue.enqueue_many([Record(i) for i in range(5)])
    first = queue.claim_many(2)
    stale = dataclasses.replace(first[1], token="not-the-attempt")
    outcomes, more = queue.complete_many_and_claim([first[0], stale], 2)
    assert outcomes == [jobq.Outcome.COMPLETED, jobq.Outcome.LOST]
    assert [claim.id for claim in more] == ids[2:4]
    assert record(queue, ids[0]).status is jobq.Status.COMPLETED
    assert record(queue, ids[1]).status is jobq.Status.IN_PROGRESS
    outcomes, more = queue.complete_many_and_claim([first[1], *more], 0)
    assert outcomes == [jobq.Outcome.COMPLETED] * 3
    assert more == []


def test_a_release_puts_unstarted_jobs_back_uncounted_row_by_row(queue: jobq.Queue) -> None:
    ids = queue.enqueue_many([Record(i) for i in range(3)])
    before = {job_id: record(queue, job_id) for job_id in ids}
    claims = queue.claim_many(3)
    released = queue.release([(claim.id, claim.token) for claim in claims[:2]])
    assert released == set(ids[:2])
    for job_id in ids[:2]:
        row = record(queue, job_id)
        assert (row.status, row.attempts, row.lease_until) == (jobq.Status.PENDING, 0, None)
        assert row.scheduled_at == before[job_id].scheduled_at
        assert token_of(queue, job_id) is None
    kept = record(queue, ids[2])
    assert (kept.status, kept.attempts) == (jobq.Status.IN_PROGRESS, 1)
    assert token_of(queue, ids[2]) == claims[2].token
    again = queue.claim_many(3)
    assert [(claim.id, claim.attempt) for claim in again] == [(ids[0], 1), (ids[1], 1)]


def test_a_stale_token_releases_and_completes_nothing(queue: jobq.Queue) -> None:
    (job_id,) = queue.enqueue_many([Record(1)])
    (old,) = queue.claim_many(1)
    assert queue.release([(old.id, old.token)]) == {job_id}
    (new,) = queue.claim_many(1)
    assert queue.release([(old.id, old.token)]) == set()
    outcomes, _ = queue.complete_many_and_claim([old], 0)
    assert outcomes == [jobq.Outcome.LOST]
    row = record(queue, job_id)
    assert (row.status, row.attempts, row.lease_until) == (
        jobq.Status.IN_PROGRESS,
        1,
        new.lease_until,
    )
    assert token_of(queue, job_id) == new.token
    outcomes, _ = queue.complete_many_and_claim([new], 0)
    assert outcomes == [jobq.Outcome.COMPLETED]
    assert queue.release([(new.id, new.token)]) == set()
    assert record(queue, job_id).status is jobq.Status.COMPLETED


def test_a_cancelled_claim_is_not_released(queue: jobq.Queue) -> None:
    (job_id,) = queue.enqueue_many([Record(1)])
    (claim,) = queue.claim_many(1)
    queue.cancel(job_id)
    assert queue.release([(claim.id, claim.token)]) == set()
    assert record(queue, job_id).status is jobq.Status.IN_PROGRESS


@pytest.mark.parametrize("n", [0, -1, 1.5, True])
def test_a_batched_claim_refuses_a_count_that_is_not_a_positive_integer(
    queue: jobq.Queue, n: Any
) -> None:
    with pytest.raises(ValueError, match="number of jobs to claim"):
        queue.claim_many(n)


def test_concurrent_batched_claimers_never_share_a_job(queue: jobq.Queue, dsn: str) -> None:
    ids = queue.enqueue_many([Noop() for _ in range(JOBS)])
    taken: list[list[int]] = [[] for _ in range(CLAIMERS)]
    errors: list[BaseException] = []

    def claimer(mine: list[int]) -> None:
        try:
            with jobq.Queue.connect(dsn, lease_duration=60) as own:
                claims = own.claim_many(7)
                while claims:
                    mine += [claim.id for claim in claims]
                    _, claims = own.complete_many_and_claim(claims, 7)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=claimer, args=(mine,)) for mine in taken]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    every = [job_id for mine in taken for job_id in mine]
    assert sorted(every) == ids
    assert queue.counts() == {"completed": JOBS}
