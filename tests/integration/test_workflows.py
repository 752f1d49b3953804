"""A job enqueued after others waits, out of the claims' way, until every parent completed,
and becomes ready in the transaction of the last parent's acknowledgement, exactly once even
when two parents complete at the same instant on two connections. A parent that ends badly
cancels its dependents, and theirs; retrying it brings them back."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import TypeVar

import pytest

import jobq
from jobq.backends.mysql import MysqlBackend
from jobq.backends.postgresql.workflows import FLAGGED_PARENTS
from jobq.backends.rows import ParentsLeft
from jobq.queue.controls import why_not_retried
from tests.integration.test_schema_upgrade import install_up_to
from tests.support.jobs import Noop
from tests.support.waiting import wait_for


class ReadsParents(jobq.Job):
    type = "reads-parents"
    seen: list[tuple[int, ...]] = []  # noqa: RUF012 - shared on purpose, reset by the test

    def handle(self) -> None:
        claim = jobq.current_claim()
        assert claim is not None
        ReadsParents.seen.append(claim.parents)


T = TypeVar("T")

NO_RETRY = jobq.RetryPolicy(max_attempts=1)
# Rounds of the race between two parents' acknowledgements.
RACES = 25


def status(queue: jobq.Queue, job_id: int) -> str:
    applied(queue)
    record = queue.get(job_id)
    assert record is not None
    return str(record.status)


def applied(queue: jobq.Queue) -> None:
    """On MySQL, an operator's cancel or retry reaches the dependents at the next claim (see
    backends/mysql/workflows.py): apply it as that claim would."""
    backend = queue.backend
    if isinstance(backend, MysqlBackend):
        with backend.transaction():
            backend.apply_endings()


def claim_of(queue: jobq.Queue, job_id: int) -> jobq.ClaimedJob:
    claim = queue.claim()
    assert claim is not None
    assert claim.id == job_id, claim
    return claim


def test_a_dependent_waits_for_every_parent_and_reads_them(queue: jobq.Queue) -> None:
    first, second = queue.enqueue(Noop()), queue.enqueue(Noop())
    child = queue.enqueue(Noop(), after=[first, second, first])
    assert status(queue, child) == "waiting"
    assert queue.backend.parents(child) == (first, second)
    assert queue.backend.dependents(first) == (child,)

    assert queue.complete(claim_of(queue, first))
    assert status(queue, child) == "waiting"
    assert queue.complete(claim_of(queue, second))
    assert status(queue, child) == "pending"

    ReadsParents.seen.clear()
    reader = queue.enqueue(ReadsParents(), after=[child])
    assert queue.process_next()
    assert queue.get(child) is not None
    assert status(queue, reader) == "pending"
    assert queue.process_next()
    assert ReadsParents.seen == [(child,)]


def test_completed_parents_count_as_done_and_bad_ones_are_refused(queue: jobq.Queue) -> None:
    done = queue.enqueue(Noop())
    assert queue.complete(claim_of(queue, done))
    assert status(queue, queue.enqueue(Noop(), after=[done])) == "pending"
    ids = queue.enqueue_many([Noop(), Noop()], after=[done])
    assert [status(queue, each) for each in ids] == ["pending", "pending"]
    queue.claim_many(10)  # out of the way

    failed = queue.enqueue(Noop())
    queue.cancel(failed)
    before = queue.counts()
    with pytest.raises(ValueError, match=f"job {failed} already ended cancelled"):
        queue.enqueue(Noop(), after=[failed])
    with pytest.raises(ValueError, match="no job has id 999999"):
        queue.enqueue_many([Noop()], after=[done, 999999])
    with pytest.raises(ValueError, match="cannot be combined"):
        queue.enqueue(Noop(), after=[done], unique_key="k")
    with pytest.raises(TypeError, match="list of job ids"):
        queue.enqueue(Noop(), after=done)  # type: ignore[arg-type]
    assert queue.counts() == before


def test_a_failure_cancels_three_levels_and_a_retry_brings_them_back(queue: jobq.Queue) -> None:
    root, other = queue.enqueue(Noop()), queue.enqueue(Noop(), retry=NO_RETRY)
    middle = queue.enqueue(Noop(), after=[root, other])
    leaves = queue.enqueue_many([Noop(), Noop()], after=[middle])
    last = queue.enqueue(Noop(), after=leaves)
    below = [middle, *leaves, last]

    assert queue.complete(claim_of(queue, root))
    claim = claim_of(queue, other)
    assert queue.fail(claim, "boom")
    ended = "failed"
    assert [status(queue, each) for each in below] == ["cancelled"] * 4
    record = queue.get(middle)
    assert record is not None
    assert record.last_error == f"Parent job {other} ended {ended}"
    record = queue.get(last)
    assert record is not None
    assert str(leaves[0]) in (record.last_error or "")

    assert queue.retry(other)
    assert [status(queue, each) for each in below] == ["waiting"] * 4
    assert queue.complete(claim_of(queue, other))
    assert status(queue, middle) == "pending"
    assert queue.complete(claim_of(queue, middle))
    for leaf in leaves:
        assert queue.complete(claim_of(queue, leaf))
    assert status(queue, last) == "pending"


def test_an_operator_cancel_reaches_waiting_jobs_and_their_dependents(queue: jobq.Queue) -> None:
    parent = queue.enqueue(Noop())
    child = queue.enqueue(Noop(), after=[parent])
    grandchild = queue.enqueue(Noop(), after=[child])
    assert queue.cancel(child)
    assert [status(queue, child), status(queue, grandchild)] == ["cancelled", "cancelled"]
    # The operator's cancel stands when the parent is retried or completes.
    assert queue.complete(claim_of(queue, parent))
    assert status(queue, child) == "cancelled"


def at_once(calls: list[Callable[[], T]]) -> list[T | Exception]:
    """Each call on a thread of its own, all released together: what each returned or
    raised, in the order they ended."""
    start = threading.Barrier(len(calls), timeout=30)
    ended: list[T | Exception] = []

    def call(each: Callable[[], T]) -> None:
        start.wait()
        try:
            ended.append(each())
        except Exception as error:
            ended.append(error)

    threads = [threading.Thread(target=call, args=(each,)) for each in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return ended


def complete_at_once(
    queues: list[jobq.Queue], claims: list[jobq.ClaimedJob]
) -> list[bool | Exception]:
    """Each claim acknowledged by its own queue's connection, all released together."""
    pairs = zip(queues, claims, strict=True)
    return at_once([partial(queue.complete, claim) for queue, claim in pairs])


def test_two_parents_completing_at_once_release_their_child_once(dsn: str) -> None:
    with jobq.Queue.connect(dsn) as one, jobq.Queue.connect(dsn) as two:
        one.install()
        for _ in range(RACES):
            parents = one.enqueue_many([Noop(), Noop()])
            child = one.enqueue(Noop(), after=parents)
            claims = one.claim_many(2)
            assert {c.id for c in claims} == set(parents)
            assert complete_at_once([one, two], claims) == [True, True]
            row = one.backend.fetchone(
                f"SELECT status, waiting_for FROM jobq_jobs WHERE id = {int(child)}"
            )
            assert tuple(row) == ("pending", 0)
            assert claim_of(one, child)


def test_pruned_jobs_take_their_edges_with_them(queue: jobq.Queue) -> None:
    parent = queue.enqueue(Noop())
    child = queue.enqueue(Noop(), after=[parent])
    assert queue.process_jobs(2) == 2
    pruned = [0]

    def all_pruned() -> bool:
        # Finished "longer ago than 0 s" once the database's clock has passed the finish.
        pruned[0] += queue.prune(0)
        return pruned[0] == 2

    wait_for("both jobs pruned", all_pruned, 10)
    assert queue.parents(child) == ()
    assert queue.backend.fetchone("SELECT count(*) FROM jobq_dependencies")[0] == 0


def enqueue_after_at_once(queues: list[jobq.Queue], parent: int) -> list[int | Exception]:
    """A dependent of `parent` enqueued by each queue, all released together, each on the
    connection named, as an application's would be: a deadlock is not retried."""
    return at_once(
        [
            partial(queue.enqueue, Noop(), after=[parent], connection=queue.connection)
            for queue in queues
        ]
    )


@pytest.mark.databases("postgresql")
def test_postgresql_two_first_dependents_of_one_parent_enqueued_at_once_both_wait(
    dsn: str,
) -> None:
    """The first dependent of a parent flags it (see FLAGGED_PARENTS). Two enqueued at once
    each lock the parent FOR SHARE: had either then updated it for the flag, each would
    wait for the other (a deadlock, one enqueue refused)."""
    with jobq.Queue.connect(dsn) as one, jobq.Queue.connect(dsn) as two:
        one.install()
        for _ in range(RACES):
            parent = one.enqueue(Noop())
            added = enqueue_after_at_once([one, two], parent)
            assert all(isinstance(each, int) for each in added), added
            children = [each for each in added if isinstance(each, int)]
            assert [status(one, child) for child in children] == ["waiting", "waiting"]
            assert flagged(one, parent)
            assert one.complete(claim_of(one, parent))
            assert [status(one, child) for child in children] == ["pending", "pending"]
            assert one.claim_many(2) != []


def flagged(queue: jobq.Queue, job_id: int) -> bool:
    row = queue.backend.fetchone(
        "SELECT has_dependents FROM jobq_jobs WHERE id = %(id)s", {"id": job_id}
    )
    return bool(row[0])


@pytest.mark.databases("postgresql")
def test_postgresql_parents_of_edges_written_before_the_flag_or_without_it_release(
    dsn: str,
) -> None:
    """The version that flags parents flags those whose dependents an earlier schema wrote;
    an edge written by an earlier release, which knows nothing of the flag, flags its parent
    through the trigger on the edges. Either parent's completion releases its dependent."""
    with jobq.Queue.connect(dsn) as queue:
        migrations = type(queue.backend).migrations
        install_up_to(queue.backend, migrations.index(FLAGGED_PARENTS))
        parent, child = queue.enqueue(Noop()), queue.enqueue(Noop())
        write_edge_as_earlier_releases_do(queue, parent, child)

        assert queue.install()[1] == len(migrations)
        assert flagged(queue, parent)
        assert not flagged(queue, child)
        later, dependent = queue.enqueue(Noop()), queue.enqueue(Noop())
        write_edge_as_earlier_releases_do(queue, later, dependent)
        assert flagged(queue, later)

        assert queue.complete(claim_of(queue, parent))
        assert status(queue, child) == "pending"
        assert queue.complete(claim_of(queue, child))
        assert queue.complete(claim_of(queue, later))
        assert status(queue, dependent) == "pending"


def write_edge_as_earlier_releases_do(queue: jobq.Queue, parent: int, child: int) -> None:
    with queue.backend.transaction():
        queue.backend.execute(
            "SELECT id FROM jobq_jobs WHERE id = %(id)s FOR SHARE", {"id": parent}
        )
        queue.backend.execute(
            "INSERT INTO jobq_dependencies (parent, child) VALUES (%(parent)s, %(child)s)",
            {"parent": parent, "child": child},
        )
        queue.backend.execute(
            "UPDATE jobq_jobs SET status = 'waiting', waiting_for = 1 WHERE id = %(id)s",
            {"id": child},
        )


def test_a_retried_dependent_waits_again_for_the_parents_not_yet_completed(
    queue: jobq.Queue,
) -> None:
    done, running = queue.enqueue(Noop()), queue.enqueue(Noop())
    child = queue.enqueue(Noop(), after=[done, running])
    assert queue.complete(claim_of(queue, done))
    claim = claim_of(queue, running)
    assert queue.cancel(child)

    assert queue.retry(child)
    assert status(queue, child) == "waiting"
    assert queue.claim() is None
    assert queue.parents_left(child) == ParentsLeft(unfinished=(running,), ended_badly=())
    assert queue.complete(claim)
    assert status(queue, child) == "pending"
    assert claim_of(queue, child)


def test_a_dependent_is_not_retried_while_a_parent_ended_badly(queue: jobq.Queue) -> None:
    parent = queue.enqueue(Noop(), retry=NO_RETRY)
    child = queue.enqueue(Noop(), after=[parent])
    cancelled = queue.enqueue(Noop(), after=[parent])
    assert queue.cancel(cancelled)  # by the operator: a parent's retry leaves it cancelled
    assert queue.fail(claim_of(queue, parent), "boom")
    assert status(queue, child) == "cancelled"

    for each in (child, cancelled):
        assert not queue.retry(each)
        why = why_not_retried(each, queue.get(each), queue)
        assert why == (
            f"job {each} waits for job {parent}, which ended failed; retry job {parent} "
            "first (the dependents its ending cancelled come back with it)"
        )
    assert queue.retry(parent)
    assert [status(queue, child), status(queue, cancelled)] == ["waiting", "cancelled"]
    assert queue.retry(cancelled)
    assert status(queue, cancelled) == "waiting"
    assert queue.complete(claim_of(queue, parent))
    assert [status(queue, child), status(queue, cancelled)] == ["pending", "pending"]


def test_a_retried_then_job_waits_again_for_the_members_not_yet_ended(
    queue: jobq.Queue,
) -> None:
    with queue.batch(then=Noop()) as batch:
        failed, left = batch.enqueue_many([Noop(), Noop()], retry=NO_RETRY)
    assert queue.fail(claim_of(queue, failed), "boom")
    assert queue.cancel(batch.id)

    assert queue.retry(batch.id)
    assert status(queue, batch.id) == "waiting"
    assert queue.parents_left(batch.id) == ParentsLeft(unfinished=(left,), ended_badly=())
    assert queue.complete(claim_of(queue, left))
    assert status(queue, batch.id) == "pending"
