"""AsyncQueue.wait(): read the job's row until it has finished, woken by the database where
it tells (PostgreSQL's NOTIFY on a job's end), polling with backoff elsewhere."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from ..backends.asynchronous import AsyncDriver
from ..records import JobRecord, Status

FINISHED = frozenset((Status.COMPLETED, Status.FAILED, Status.EXPIRED, Status.CANCELLED))
# The poll's first interval and its ceiling, in seconds: a quick job is seen quickly, a long
# one costs a read every couple of seconds.
FIRST_POLL = 0.02
MAX_POLL = 2.0
# With wake-ups the row is read again at least this often anyway: a wake-up lost with its
# connection is never missed for longer.
NOTIFIED_POLL = 10.0


async def wait(
    get: Callable[[int], Awaitable[JobRecord | None]],
    driver: AsyncDriver,
    job_id: int,
    timeout: float | None,
) -> JobRecord:
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0
    ):
        raise ValueError(f"timeout must be a number of seconds >= 0 or None, got {timeout!r}")
    deadline = None if timeout is None else time.monotonic() + timeout
    # Watching before the first read: an end after that read is told.
    woken = await driver.watch(job_id)
    try:
        return await until_finished(get, job_id, deadline, woken)
    finally:
        if woken is not None:
            await driver.unwatch(job_id, woken)


async def until_finished(
    get: Callable[[int], Awaitable[JobRecord | None]],
    job_id: int,
    deadline: float | None,
    woken: asyncio.Event | None,
) -> JobRecord:
    interval = FIRST_POLL if woken is None else NOTIFIED_POLL
    while True:
        record = await get(job_id)
        if record is None:
            raise LookupError(f"no job with id {job_id}")
        if record.status in FINISHED:
            return record
        pause = interval if deadline is None else min(interval, deadline - time.monotonic())
        if pause <= 0:
            raise TimeoutError(f"job {job_id} is still {record.status}")
        if woken is None:
            await asyncio.sleep(pause)
            interval = min(interval * 1.5, MAX_POLL)
            continue
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(woken.wait(), pause)
        woken.clear()
