"""The types a worker of the `*` pool claims, on every database: those with ready jobs that no
other pool names, a job class's or given only at enqueue, read again once a claim of them came
back empty or the list is a poll interval old."""

from __future__ import annotations

from collections.abc import Callable

import jobq
from jobq.worker.claim_types import ClaimTypes
from tests.support.jobs import Noop

POLL = 1.0


def fails(call: Callable[[], object]) -> bool:
    """Whether call() raises: the driver's own error, whichever the database (the worker's
    claim path takes any as a lost connection)."""
    try:
        call()
    except Exception:
        return True
    return False


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_star_pool_lists_types_given_at_enqueue_and_leaves_the_others_backlog(
    queue: jobq.Queue,
) -> None:
    backlog = queue.enqueue_many([Noop() for _ in range(20)], type="import")
    queue.enqueue(Noop(), type="loose")  # no class declares it
    queue.enqueue(Noop())
    queue.enqueue(Noop(), type="later", delay=3600)  # not ready: not listed
    clock = Clock()
    types = ClaimTypes((), ("import",), POLL, clock)
    assert types.now(queue) == ("loose", "noop")

    claimed = queue.claim_many(10, types.now(queue))
    types.claimed(10, len(claimed))
    assert sorted(claim.type for claim in claimed) == ["loose", "noop"]
    assert queue.counts(type="import") == {"pending": len(backlog)}

    # A claim that brought jobs keeps the list; an empty one has it read again.
    queue.enqueue(Noop(), type="new")
    types.claimed(10, 1)
    assert types.now(queue) == ("loose", "noop")
    assert queue.claim_many(10, types.now(queue)) == []
    types.claimed(10, 0)
    assert types.now(queue) == ("new",)

    # Busy, it is read again once a poll interval old.
    queue.enqueue(Noop(), type="newer")
    clock.now += POLL / 2
    assert types.now(queue) == ("new",)
    clock.now += POLL / 2
    assert types.now(queue) == ("new", "newer")


def test_with_only_the_other_pools_types_ready_it_claims_nothing(queue: jobq.Queue) -> None:
    queue.enqueue(Noop(), type="import")
    types = ClaimTypes((), ("import",), POLL, Clock())
    # None, never (): an empty list of types would claim every type.
    assert types.now(queue) is None
    queue.enqueue(Noop(), type="loose")
    # Nothing listed: the next look reads again, with no claim in between.
    assert types.now(queue) == ("loose",)


def test_a_failed_read_raises_when_idle_and_claims_nothing_when_busy(
    dsn: str, queue: jobq.Queue
) -> None:
    queue.enqueue(Noop(), type="loose")
    closed = jobq.Queue.connect(dsn)
    closed.close()
    types = ClaimTypes((), ("import",), POLL, Clock())
    # Busy, the attempt in hand is acknowledged without a claim; idle, the worker reconnects.
    assert types.now(closed, busy=True) is None
    assert fails(lambda: types.now(closed))
    assert types.now(queue) == ("loose",)
