"""How a concurrent worker runs one attempt's code: an `async def handle` as a task on the
worker's event loop, a plain `def handle` in one of its threads. Either way the attempt is
framed as a process worker frames it (queue/consuming.py's Handling): current_claim() and
cancel_requested() answer for this attempt, in its task or its thread, and the before_job
hooks run there (so Django's close_old_connections runs in the thread whose connections
the job uses)."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from typing import cast

from ...job import Job
from ...queue import Queue
from ...records import ClaimedJob


def is_coroutine(job: Job) -> bool:
    return inspect.iscoroutinefunction(job.handle)


async def handled(
    queue: Queue, claim: ClaimedJob, job: Job, threads: ThreadPoolExecutor
) -> Exception | None:
    """Run the attempt's code: the error that failed it, or None once it completed."""
    if is_coroutine(job):
        return await coroutine_handled(queue, claim, job)
    # run_in_executor does not carry the caller's context variables over by itself.
    context = contextvars.copy_context()
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(threads, context.run, queue._handled, claim, job)


async def coroutine_handled(queue: Queue, claim: ClaimedJob, job: Job) -> Exception | None:
    """Queue._handled's twin for an `async def handle`, in the task that awaits it."""
    with queue._handling(claim) as handling:
        handling.begin()
        await cast(Awaitable[object], job.handle())
    return handling.error
