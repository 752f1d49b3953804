"""AsyncQueue.wait(): Queue.wait()'s loop (waiting.py's Patience) for asyncio, woken by the
async driver where the database tells (PostgreSQL's NOTIFY on a job's end)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from ..backends.asynchronous import AsyncDriver
from ..records import JobRecord
from .waiting import Patience


async def wait(
    get: Callable[[int], Awaitable[JobRecord | None]],
    driver: AsyncDriver,
    job_id: int,
    timeout: float | None,
) -> JobRecord:
    patience = Patience(job_id, timeout)
    # Watching before the first read: an end after that read is told.
    woken = await driver.watch(job_id)
    patience.watching(woken is not None)
    try:
        while (record := patience.finished(await get(job_id))) is None:
            if woken is None:
                await asyncio.sleep(patience.pause())
                continue
            pause = patience.pause()  # its TimeoutError is the caller's, not suppressed below
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), pause)
            woken.clear()
        return record
    finally:
        if woken is not None:
            await driver.unwatch(job_id, woken)
