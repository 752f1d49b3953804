"""What every async driver provides to jobq.AsyncQueue: one connection of an asyncio driver
that runs the backends' operations (steps.py), written once for the sync and async queues.

The statements, their parameters and the rows' shapes come from the database's sync Backend
class, detached from any connection; a driver adds only the I/O. Like a Backend, it never
says which database it is to the queue core.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, ClassVar, TypeVar

from .base import Backend
from .retries import TRIES, pause_to_retry
from .steps import Fetch, Statement, Step, Steps, drive_async, fetched_async

log = logging.getLogger("jobq")

T = TypeVar("T")


class AsyncDriver:
    # The statements that open one transaction on an autocommit connection, as the sync
    # backend's transaction() opens it.
    begin: ClassVar[tuple[str, ...]] = ("BEGIN",)

    def __init__(self, backend: Backend, connection: Any) -> None:
        self.backend = backend
        self.connection = connection
        # One operation at a time on the connection: a transaction spans several awaits, and
        # another task's statement must not land inside it.
        self.lock = asyncio.Lock()

    async def close(self) -> None:
        await self.connection.close()

    async def perform(self, step: Step, connection: Any) -> Any:
        """Run one statement and give what it asks for (see steps.Fetch)."""
        if not isinstance(step, Statement):
            raise NotImplementedError("only PostgreSQL copies rows")
        async with self.cursor(connection) as cursor:
            await cursor.execute(step.sql, step.params)
            return await fetched_async(cursor, step.fetch)

    def cursor(self, connection: Any) -> Any:
        """A new cursor of `connection`, as an async context manager."""
        return connection.cursor()

    async def run(self, steps: Steps[T], connection: Any) -> T:
        """Run an operation on `connection`, in whatever transaction it has open."""
        return await drive_async(steps, lambda step: self.perform(step, connection))

    async def run_together(self, steps: Steps[T], connection: Any) -> T:
        """run() on the application's connection, for statements that must land together: in
        its transaction (a driver that could run them apart there overrides)."""
        return await self.run(steps, connection)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """One transaction of jobq's own on its own connection: committed when the block
        ends, rolled back if it raises."""
        for sql in self.begin:
            await self.statement(sql)
        try:
            yield
        except BaseException:
            await self.rollback_quietly()
            raise
        await self.statement("COMMIT")

    async def statement(self, sql: str) -> None:
        await self.perform(Statement(sql, None, Fetch.COUNT), self.connection)

    async def rollback_quietly(self) -> None:
        try:
            await self.statement("ROLLBACK")
        except Exception:
            log.debug("rollback after a failed statement failed too", exc_info=True)

    async def own(self, what: str, steps: Callable[[], Steps[T]], together: bool = False) -> T:
        """Run an operation on jobq's own connection, `together` in one transaction, rerun
        when the database aborted it transiently (as Backend.retrying reruns a sync one:
        every statement it runs is safe to send again)."""
        for attempt in range(1, TRIES + 1):
            try:
                async with self.lock:
                    if not together:
                        return await self.run(steps(), self.connection)
                    async with self.transaction():
                        return await self.run(steps(), self.connection)
            except Exception as error:
                if attempt == TRIES or not self.backend.is_transient(error):
                    raise
                await asyncio.sleep(pause_to_retry(what, attempt, error))
        raise AssertionError("unreachable")

    async def watch(self, job_id: int) -> asyncio.Event | None:
        """An event set when the database tells that this job may have ended, or None where
        it tells nothing and a waiter polls (see AsyncQueue.wait)."""
        return None

    async def unwatch(self, job_id: int, event: asyncio.Event) -> None:
        """Stop telling `event` about this job."""
