"""How a concurrent worker runs one attempt's code: an `async def handle` as a task on the
worker's event loop, a plain `def handle` in one of its threads. Either way the attempt is
framed as a process worker frames it (queue/consuming.py's Handling): current_claim(),
cancel_requested(), progress(), checkpoint() and steps answer for this attempt, in its task or its
thread, and the before_job hooks run there (so Django's close_old_connections runs in the
thread whose connections the job uses). The after_job hooks run there too (loop.py)."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, cast

from ...backends.base import Backend
from ...backends.events import EventState
from ...job import Job
from ...queue import Queue
from ...queue.consuming import Handling
from ...records import JobRecord
from .inflight import Attempt, InFlight


def is_coroutine(job: Job) -> bool:
    return inspect.iscoroutinefunction(job.handle)


class OneStatementAtATime:
    """The worker's backend as its jobs' progress(), checkpoint() and steps reach it, from their
    threads and tasks: each write waits for the statement the database thread may be
    running, as a connection takes one statement at a time. A coroutine's write holds up
    the event loop for as long: one short statement."""

    # Not the attempt's own: a step with transaction=True refuses it (queue/durable.py).
    shared = True

    def __init__(self, backend: Backend, lock: threading.Lock) -> None:
        self.backend = backend
        self.lock = lock

    def attempt_write(self, column: str, job_id: int, token: str, value: str) -> bool:
        with self.lock:
            return self.backend.attempt_write(column, job_id, token, value)

    def record_step(self, job_id: int, token: str, name: str, value: str, size: int) -> bool:
        with self.lock:
            return self.backend.record_step(job_id, token, name, value, size)

    def steps_of(self, job_id: int) -> dict[str, str]:
        with self.lock:
            return self.backend.steps_of(job_id)

    def hold_event(self, job_id: int, token: str, key: str) -> EventState | None:
        with self.lock:
            return self.backend.hold_event(job_id, token, key)

    def event_state(self, key: str) -> EventState:
        with self.lock:
            return self.backend.event_state(key)

    def unmark_event(self, job_id: int, token: str) -> None:
        with self.lock:
            self.backend.unmark_event(job_id, token)

    def add_children(self, *args: Any) -> list[int] | None:
        with self.lock:
            return self.backend.add_children(*args)

    def children(self, ids: Sequence[int]) -> list[JobRecord | None]:
        with self.lock:
            return self.backend.children(ids)

    def emit_now(self, key: str, payload: str) -> bool:
        with self.lock:
            return self.backend.emit_now(key, payload)

    def __getattr__(self, name: str) -> object:
        return getattr(self.backend, name)


async def handled(
    queue: Queue,
    attempt: Attempt,
    job: Job,
    threads: ThreadPoolExecutor,
    lock: threading.Lock,
    inflight: InFlight,
) -> Handling:
    """Run the attempt's code: its frame, with the error that failed it or its result. A
    thread runs it as the attempt's (InFlight.run_for): what it starts is the attempt's."""
    backend = cast(Backend, OneStatementAtATime(queue.backend, lock))
    claim = attempt.claim
    if is_coroutine(job):
        return await queue._awaited(claim, job, backend)
    # run_in_executor does not carry the caller's context variables (the attempt's span
    # among them) over by itself.
    context = contextvars.copy_context()
    run = partial(context.run, queue._handled, claim, job, backend)
    return await asyncio.get_running_loop().run_in_executor(
        threads, partial(inflight.run_for, attempt, run)
    )
