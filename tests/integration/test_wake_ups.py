"""On PostgreSQL, a worker is woken for new jobs while it is marked idle, and only then: a
busy worker's connection keeps nothing of the enqueues made meanwhile."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import jobq
from tests.support.jobs import Noop

pytestmark = pytest.mark.databases("postgresql")

# Each enqueue is its own transaction, so each sends its own wake-up.
BUSY_SPELL = 200


@pytest.fixture
def worker(dsn: str) -> Iterator[jobq.Queue]:
    with jobq.Queue.connect(dsn) as queue:
        assert queue._listen()
        yield queue


def test_a_busy_worker_keeps_no_wake_up_of_the_jobs_enqueued_meanwhile(
    queue: jobq.Queue, worker: jobq.Queue
) -> None:
    for _ in range(BUSY_SPELL):
        queue.enqueue(Noop())
    for _ in range(3):
        claim = worker.claim()
        assert claim is not None
        assert worker.complete(claim)
    # What the connection received while its statements ran, and holds for a reader.
    assert list(worker.backend.connection.notifies(timeout=0)) == []

    assert worker._mark_idle()
    assert not worker._wait_for_jobs(0.2), "woken with nothing enqueued since the mark"
    queue.enqueue(Noop())
    assert worker._wait_for_jobs(10), "an idle worker not woken by an enqueue"
    worker._unmark_idle()


def test_stale_wake_ups_are_dropped_when_a_worker_goes_idle_again(
    queue: jobq.Queue, worker: jobq.Queue
) -> None:
    """Wake-ups sent while it was idle that it did not wait for (the enqueues after the
    one that woke it) announce jobs its claims since have seen."""
    assert worker._mark_idle()
    for _ in range(3):
        queue.enqueue(Noop())
    assert worker._wait_for_jobs(10)
    worker._unmark_idle()
    assert worker._mark_idle()
    assert not worker._wait_for_jobs(0.2), "a stale wake-up"
    worker._unmark_idle()
