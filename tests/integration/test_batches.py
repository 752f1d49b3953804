"""A batch's `then` job is enqueued exactly once, after every member has ended whatever the
outcome, even when the last two members complete at once on two connections; an empty
batch runs it at once; a batch written on the application's connection is in its
transaction; cancelling a batch cancels its unfinished members, and `then` runs after."""

from __future__ import annotations

import pytest

import jobq
from tests.integration.test_workflows import NO_RETRY, applied, claim_of, complete_at_once, status
from tests.support.jobs import Noop, Record

RACES = 25


class Rollback(Exception):
    """Raised to roll the application's transaction back."""


def test_then_runs_after_every_member_ended_whatever_the_outcome(queue: jobq.Queue) -> None:
    with queue.batch(then=Record("done")) as batch:
        members = [batch.enqueue(Noop(), retry=NO_RETRY) for _ in range(2)]
        members += batch.enqueue_many([Noop()])
    assert [record.id for record in queue.batch_jobs(batch.id)] == members[::-1]
    assert status(queue, batch.id) == "waiting"

    assert queue.complete(claim_of(queue, members[0]))
    assert queue.fail(claim_of(queue, members[1]), "boom")
    assert status(queue, batch.id) == "waiting"
    assert queue.cancel(members[2])
    assert status(queue, batch.id) == "pending"
    counts = queue.batch_status(batch.id)
    assert (counts["completed"], counts["failed"], counts["cancelled"]) == (1, 1, 1)
    assert sum(counts.values()) == 3


def test_an_empty_batch_runs_then_at_once(queue: jobq.Queue) -> None:
    with queue.batch(then=Noop()) as batch:
        pass
    assert status(queue, batch.id) == "pending"
    assert queue.batch_status(batch.id)["pending"] == 0


def test_cancelling_a_batch_cancels_what_is_left_and_then_runs(queue: jobq.Queue) -> None:
    with queue.batch(then=Record("after")) as batch:
        done, running, left = batch.enqueue_many([Noop(), Noop(), Noop()])
    assert queue.complete(claim_of(queue, done))
    claim = claim_of(queue, running)
    assert queue.cancel_batch(batch.id) == 2
    assert [status(queue, left), status(queue, batch.id)] == ["cancelled", "waiting"]
    # The running member is asked to stop; its end is what releases `then`.
    assert queue.backend.end_cancelled(claim.id, claim.token, "cancelled")
    assert status(queue, batch.id) == "pending"


def test_a_batch_on_the_application_s_connection_is_in_its_transaction(dsn: str) -> None:
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        made: list[int] = []

        def write_then_roll_back() -> None:
            with queue.backend.transaction():
                with queue.batch(then=Noop(), connection=queue.backend.connection) as batch:
                    made.extend([batch.id, batch.enqueue(Noop())])
                record = queue.get(made[1])
                assert record is not None
                assert record.status is jobq.Status.PENDING
                raise Rollback

        with pytest.raises(Rollback):
            write_then_roll_back()
        assert [queue.get(each) for each in made] == [None, None]
        assert queue.counts() == {}


def test_the_last_two_members_ending_at_once_release_then_once(dsn: str) -> None:
    with jobq.Queue.connect(dsn) as one, jobq.Queue.connect(dsn) as two:
        one.install()
        for _ in range(RACES):
            with one.batch(then=Noop()) as batch:
                members = batch.enqueue_many([Noop(), Noop()])
            claims = one.claim_many(2)
            assert {c.id for c in claims} == set(members)
            assert complete_at_once([one, two], claims) == [True, True]
            applied(one)
            row = one.backend.fetchone(
                f"SELECT status, waiting_for FROM jobq_jobs WHERE id = {int(batch.id)}"
            )
            assert tuple(row) == ("pending", 0)
            assert claim_of(one, batch.id)


def test_a_member_with_a_unique_key_is_refused_and_nothing_is_written(
    queue: jobq.Queue,
) -> None:
    """A key another job holds would give that job's id, maybe another batch's member, and
    `then` would count a member it never sees end; a key repeated in the batch, one row for
    two members."""
    held = queue.enqueue(Noop(), unique_key="k")
    before = queue.counts()
    with queue.batch(then=Record("ours")) as batch:
        with pytest.raises(ValueError, match="unique_key") as refused:
            batch.enqueue(Noop(), unique_key="k")
        assert str(refused.value) == (
            "a batch member cannot have a unique_key: a key another job holds would give "
            "that job's id, which is not this batch's; leave unique_key out"
        )
        with pytest.raises(ValueError, match="cannot have a unique_key"):
            batch.enqueue_many([Noop(), Noop()], unique_key=["x", "x"])
    assert queue.batch_jobs(batch.id) == []
    assert status(queue, batch.id) == "pending", "the empty batch's `then` runs at once"
    assert queue.counts() == {"pending": before["pending"] + 1}
    assert queue.unique_holder("k") == held
