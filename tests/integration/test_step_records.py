"""The table of durable steps: a step is recorded only by the attempt that holds its job and
an unexpired lease, replay reads a job's steps back by name, `jobq show`'s list gives each
step's attempt, time and size, and the steps go with their job when it is pruned."""

from __future__ import annotations

import pytest

import jobq
from tests.support.jobs import Noop
from tests.support.waiting import wait_for, wait_lease_ended

AGAIN = jobq.RetryPolicy(max_attempts=3, backoff=0, jitter=False)


@pytest.mark.lease(0.5)
def test_only_the_attempt_holding_the_job_and_its_lease_records_a_step(
    queue: jobq.Queue,
) -> None:
    backend = queue.backend
    job_id = queue.enqueue(Noop(), retry=AGAIN)
    first = queue.claim()
    assert first is not None
    assert backend.record_step(job_id, first.token, "charge", '"ch_1"', 6)
    assert backend.record_step(job_id, "another", "email", "null", 4) is False
    # Fenced: the lease ended, nobody took the job yet.
    wait_lease_ended(queue, job_id)
    assert backend.record_step(job_id, first.token, "email", "null", 4) is False
    queue.run_maintenance()
    second = queue.claim()
    assert second is not None
    assert backend.record_step(job_id, second.token, "Email ", "1", 1)
    # Superseded: the job is another attempt's.
    assert backend.record_step(job_id, first.token, "email", "null", 4) is False
    # Names compare exactly, on every database: "Email " is not "email".
    assert backend.steps_of(job_id) == {"charge": '"ch_1"', "Email ": "1"}
    listed = {step.name: step for step in backend.step_records(job_id)}
    assert (listed["charge"].attempt, listed["charge"].size) == (1, 6)
    assert (listed["Email "].attempt, listed["Email "].size) == (2, 1)
    assert listed["charge"].recorded_at <= listed["Email "].recorded_at


def test_steps_go_with_their_job_when_it_is_pruned(queue: jobq.Queue) -> None:
    kept, pruned = queue.enqueue(Noop()), queue.enqueue(Noop())
    for _ in range(2):
        claim = queue.claim()
        assert claim is not None
        assert queue.backend.record_step(claim.id, claim.token, "only", "1", 1)
        if claim.id == pruned:
            assert queue.run(claim) is jobq.Outcome.COMPLETED
    # A job ended this instant is not yet older than 0 s where the clock is coarse.
    wait_for("the finished job to be pruned", lambda: queue.prune(older_than=0) == 1)
    assert queue.backend.steps_of(pruned) == {}
    assert queue.backend.steps_of(kept) == {"only": "1"}
