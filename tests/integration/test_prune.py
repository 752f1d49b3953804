"""prune deletes finished jobs in bounded batches, of the statuses asked for, keeps those
other jobs still need (see backends/workflows.py's KEPT), and leaves the work to another
pruner it finds at it."""

from __future__ import annotations

import pytest

import jobq
import jobq.queue.maintenance
from tests.integration.test_workflows import applied
from tests.support.jobs import Boom, Noop, Record
from tests.support.waiting import wait_for

ONCE = jobq.RetryPolicy(max_attempts=1)


pytestmark = pytest.mark.lease(60)


def test_prune_deletes_in_batches_until_none_is_left(
    queue: jobq.Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobq.queue.maintenance, "PRUNE_BATCH", 3)
    statements: list[int] = []
    prune = queue.backend.prune

    def counted(*args: object) -> int | None:
        deleted = prune(*args)  # type: ignore[arg-type]
        assert deleted is not None
        statements.append(deleted)
        return deleted

    monkeypatch.setattr(queue.backend, "prune", counted)
    queue.enqueue_many([Noop() for _ in range(10)])
    waiting = queue.enqueue(Noop(), delay=3600)
    assert queue.process_jobs(20) == 10
    deleted = [0]

    def all_gone() -> bool:
        deleted[0] += queue.prune(older_than=0)
        return deleted[0] == 10

    wait_for("every finished job to be pruned", all_gone)
    assert statements
    assert max(statements) <= 3
    assert queue.counts() == {"pending": 1}
    assert queue.get(waiting) is not None


def test_prune_deletes_only_the_statuses_asked(queue: jobq.Queue) -> None:
    done = queue.enqueue(Noop())
    failed = queue.enqueue(Boom(), retry=ONCE)
    assert queue.process_jobs(5) == 2
    wait_for("the failed job to be pruned", lambda: queue.prune(0, statuses=["failed"]) == 1)
    assert queue.get(failed) is None
    assert queue.get(done) is not None
    assert queue.prune(0, statuses=[jobq.Status.EXPIRED]) == 0
    assert queue.prune(0, statuses=[jobq.Status.COMPLETED, "completed"]) == 1


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize(
    ("statuses", "message"),
    [
        (["pending"], "not 'pending'"),
        ([jobq.Status.IN_PROGRESS], "only finished jobs"),
        (["done"], "not 'done'"),
        ([], "at least one status"),
    ],
)
def test_prune_refuses_statuses_that_are_not_finished(
    queue: jobq.Queue, statuses: list[str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        queue.prune(0, statuses=statuses)


def pruned_but(queue: jobq.Queue, kept: list[int], statuses: list[str] | None = None) -> None:
    """Prune finished jobs (of `statuses`, by default all) of any age until a job that
    nothing needs, finished now, is gone (so a prune that could have taken `kept` has run),
    then check `kept` is there."""
    control = queue.enqueue(Noop())
    assert queue.process_jobs(1, type="noop") == 1

    def control_gone() -> bool:
        queue.prune(0, statuses)
        return queue.get(control) is None

    wait_for("the control job to be pruned", control_gone)
    for job_id in kept:
        assert queue.get(job_id) is not None, f"job {job_id} was pruned"


def prune_all(queue: jobq.Queue, ids: list[int]) -> None:
    def all_gone() -> bool:
        queue.prune(0)
        return all(queue.get(job_id) is None for job_id in ids)

    wait_for(f"jobs {ids} to be pruned", all_gone)


def test_a_parent_is_kept_until_its_dependent_has_ended(queue: jobq.Queue) -> None:
    first = queue.enqueue(Noop())
    second = queue.enqueue(Record("second"))
    child = queue.enqueue(Record("child"), after=[first, second])
    assert queue.process_jobs(1, type="noop") == 1
    pruned_but(queue, [first])
    assert queue.process_jobs(5, type="record") == 2
    prune_all(queue, [first, second, child])


def test_a_batch_member_is_kept_until_the_then_job_has_ended(queue: jobq.Queue) -> None:
    with queue.batch(then=Record("then")) as batch:
        member = batch.enqueue(Noop())
        still = batch.enqueue(Boom(), retry=ONCE)
    assert queue.process_jobs(5, type="noop") == 1
    pruned_but(queue, [member, batch.id])
    assert queue.process_jobs(5, type="boom") == 1
    applied(queue)
    pruned_but(queue, [member, still, batch.id])
    assert queue.process_jobs(5, type="record") == 1
    prune_all(queue, [member, still, batch.id])


def test_a_job_cancelled_by_its_parent_is_kept_while_the_parent_can_be_retried(
    queue: jobq.Queue,
) -> None:
    parent = queue.enqueue(Boom(), retry=ONCE)
    child = queue.enqueue(Noop(), after=[parent])
    assert queue.process_jobs(5, type="boom") == 1
    applied(queue)
    record = queue.get(child)
    assert record is not None
    assert record.status is jobq.Status.CANCELLED
    # Failed jobs are kept longer than cancelled ones (7 days, 24 hours by default).
    pruned_but(queue, [parent, child], statuses=["completed", "cancelled"])
    assert queue.retry(parent)
    applied(queue)
    record = queue.get(child)
    assert record is not None
    assert record.status is jobq.Status.WAITING


def test_a_pruned_unique_job_changes_nothing_its_key_admits(queue: jobq.Queue) -> None:
    first = queue.enqueue(Noop(), unique_key="nightly")
    assert queue.enqueue(Noop(), unique_key="nightly") == first  # pending: the key holds
    assert queue.process_jobs(1) == 1
    again = queue.enqueue(Noop(), unique_key="nightly")  # finished: the key is free
    assert again != first
    prune_all(queue, [first])
    assert queue.enqueue(Noop(), unique_key="nightly") == again


@pytest.mark.databases("postgresql", "mariadb")
def test_prune_leaves_the_work_to_a_pruner_it_finds_at_it(queue: jobq.Queue, dsn: str) -> None:
    done = queue.enqueue(Noop())
    assert queue.process_jobs(1) == 1
    with jobq.Queue.connect(dsn) as other, other.backend.pruning() as alone:
        assert alone
        assert queue.prune(0) == 0
        with queue.backend.pruning() as second:
            assert not second
    prune_all(queue, [done])
