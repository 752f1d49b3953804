"""Running jobs in the test's own process, as Oban.Testing's drain_queue and perform_job:
drain() runs what is ready (and what that enqueues, unless told not to), on a Queue or, awaited,
on an AsyncQueue; perform() runs one job as a worker would without a queue of the test's."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, overload

from .. import hooks
from ..job import Job
from ..queue import Queue
from ..queue.asynchronous import AsyncQueue
from ..queue.suspending import Suspend
from ..records import ClaimedJob, Outcome, Status
from ..retry import RetryPolicy
from .queues import companion
from .queues import queue as throwaway

ONCE = RetryPolicy(max_attempts=1)
# The most pending jobs a drain without recursion takes as its first pass: a test's few.
PASS_LIMIT = 10_000


@dataclass
class Drained:
    """What a drain ran: attempts by outcome, each failed attempt's error by job id, and
    each completed job's result by job id."""

    completed: int = 0
    retried: int = 0
    failed: int = 0
    expired: int = 0
    cancelled: int = 0
    lost: int = 0
    suspended: int = 0  # attempts that suspended their job (jobq.sleep, wait_for, gather)
    errors: dict[int, str] = field(default_factory=dict)
    results: dict[int, Any] = field(default_factory=dict)

    def add(self, job_id: int, outcome: Outcome, error: str | None, result: Any) -> None:
        setattr(self, str(outcome), getattr(self, str(outcome)) + 1)
        if outcome is Outcome.COMPLETED:
            self.results[job_id] = result
        elif error is not None and outcome is not Outcome.SUSPENDED:
            self.errors[job_id] = error


class JobSuspended(Exception):
    """perform(): the job suspended itself (jobq.sleep, snooze, wait_for, gather), which
    one attempt cannot go past. `reason` says why, as the job's last error would; `delay`
    is in how many seconds it would run again. drain() runs such a job on (a sleep, with
    with_scheduled=True; a wait, once its event is emitted)."""

    def __init__(self, reason: str, delay: float) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay = delay


@overload
def drain(
    queue: Queue,
    types: Iterable[str] | str | None = None,
    with_scheduled: bool = False,
    with_recursion: bool = True,
) -> Drained: ...


@overload
def drain(
    queue: AsyncQueue,
    types: Iterable[str] | str | None = None,
    with_scheduled: bool = False,
    with_recursion: bool = True,
) -> Coroutine[Any, Any, Drained]: ...


def drain(
    queue: Queue | AsyncQueue,
    types: Iterable[str] | str | None = None,
    with_scheduled: bool = False,
    with_recursion: bool = True,
) -> Drained | Coroutine[Any, Any, Drained]:
    """Run every ready job of `types` (all by default) in this process, one at a time, and
    the jobs they enqueue or release, until none is ready. With `with_scheduled`, jobs
    scheduled later (delays, retries' backoff) are made due and run too, until none is left
    pending: a retry policy's every attempt runs without waiting, and a durable sleep
    ends at once; a job waiting for an event (jobq.wait_for) stays waiting until the event
    is emitted (its timeout is not brought forward). With `with_recursion`
    False, only one attempt of each job pending when the drain began runs: what those jobs
    enqueue or release, and their retries, are left pending.

    Given an AsyncQueue (from jobq.testing.async_queue or the jobq_async_queue fixture), it
    returns a coroutine: `await drain(queue)` runs the jobs, `async def handle` ones on the
    awaiting event loop."""
    chosen = (types,) if isinstance(types, str) else tuple(types or ())
    if isinstance(queue, AsyncQueue):
        return drain_async(companion(queue), chosen, with_scheduled, with_recursion)
    drained = Drained()
    for claim in attempts(queue, chosen, with_scheduled, with_recursion):
        outcome = queue.run(claim)
        record = queue.get(claim.id)
        error = None if record is None else record.last_error
        drained.add(claim.id, outcome, error, None if record is None else record.result)
    return drained


def attempts(
    queue: Queue, chosen: tuple[str, ...], with_scheduled: bool, with_recursion: bool
) -> Iterator[ClaimedJob]:
    """The claims a drain runs, each claimed once the one before has run. Without recursion,
    a claim of a job outside the first pass is held, so that the next claim finds another
    job, and released (its attempt not counted) when the drain ends."""
    first_pass = None
    if not with_recursion:
        if with_scheduled:
            queue.backend.bring_forward(chosen)
        first_pass = {record.id for record in queue.jobs(Status.PENDING, limit=PASS_LIMIT)}
    held: list[ClaimedJob] = []
    try:
        while True:
            if with_scheduled and with_recursion:
                queue.backend.bring_forward(chosen)
            claim = queue.claim(chosen)
            if claim is None:
                return
            if first_pass is None:
                yield claim
            elif claim.id in first_pass:
                first_pass.discard(claim.id)  # once: a retry of it is held like a new job
                yield claim
            else:
                held.append(claim)
    finally:
        queue.release([(claim.id, claim.token) for claim in held])


async def drain_async(
    queue: Queue, chosen: tuple[str, ...], with_scheduled: bool, with_recursion: bool
) -> Drained:
    """drain() on `queue`, the AsyncQueue's companion on the same database, in a thread of
    its own; the AsyncQueue has no consumer side. A coroutine job is sent back to this event
    loop, where the connections it may use were opened, while the thread waits for it."""
    queue._coroutine_loop = asyncio.get_running_loop()
    try:
        return await asyncio.to_thread(drain, queue, chosen, with_scheduled, with_recursion)
    finally:
        queue._coroutine_loop = None


def perform(job: Job) -> Any:
    """Run `job` as a worker would, and return its result or raise its exception: on a
    throwaway in-memory queue, its payload stored and decoded, the before_job and after_job
    hooks run, current_claim(), progress() and checkpoint() answering for its attempt, its
    result encoded and stored. Nothing reaches the application's queue. A job that
    suspends itself raises JobSuspended."""
    with throwaway() as queue:
        queue.hooks = hooks.for_jobs()
        job_id = queue.enqueue(job, retry=ONCE)
        claim = queue.claim(job.type)
        assert claim is not None, f"job {job_id} could not be claimed"
        # The worker's own steps (consuming.py), kept apart to raise the job's exception.
        handling = queue._handled(claim, queue.codec.decode(claim.class_name, claim.payload))
        error = handling.error
        if error is not None:
            queue._settle_failure(claim, error)
            if isinstance(error, Suspend):
                raise JobSuspended(error.message, error.delay)
            raise error
        queue.complete(claim.completed(handling.result))
        record = queue.get(job_id)
        assert record is not None
        return record.result
