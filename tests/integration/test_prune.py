"""prune deletes finished jobs in bounded batches, of the statuses asked for."""

from __future__ import annotations

import pytest

import jobq
import jobq.queue.maintenance
from tests.support.jobs import Boom, Noop
from tests.support.waiting import wait_for

ONCE = jobq.RetryPolicy(max_attempts=1)


pytestmark = pytest.mark.lease(60)


def test_prune_deletes_in_batches_until_none_is_left(
    queue: jobq.Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobq.queue.maintenance, "PRUNE_BATCH", 3)
    statements: list[int] = []
    prune = queue.backend.prune

    def counted(*args: object) -> int:
        deleted = prune(*args)  # type: ignore[arg-type]
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
    assert statements and max(statements) <= 3
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
