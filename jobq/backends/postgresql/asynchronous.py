"""PostgreSQL for jobq.AsyncQueue: psycopg 3's AsyncConnection, which comes with psycopg
itself, running the statements PostgresBackend declares; and the wake-ups of waiters."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, TypeVar

import psycopg

from ..asynchronous import AsyncDriver
from ..naming import application_name
from ..steps import CopyRows, Step, Steps, count
from . import PostgresBackend
from .dsn import libpq_dsn
from .insert import outside_transaction
from .results import FINISHED_CHANNEL, MARK_WAITED

T = TypeVar("T")


async def connect(dsn: str) -> PostgresAsyncDriver:
    # No server-side prepared statements: a producer's statements are short, and through a
    # transaction pooler a prepared statement may be missing on the next server connection.
    connection = await psycopg.AsyncConnection.connect(
        libpq_dsn(dsn), autocommit=True, prepare_threshold=None, **application_name(dsn)
    )
    return PostgresAsyncDriver(PostgresBackend.detached(), connection, dsn)


class PostgresAsyncDriver(AsyncDriver):
    def __init__(self, backend: PostgresBackend, connection: Any, dsn: str) -> None:
        super().__init__(backend, connection)
        self.wakeups = Wakeups(dsn)

    async def close(self) -> None:
        await self.wakeups.close()
        await super().close()

    async def perform(self, step: Step, connection: Any) -> Any:
        if not isinstance(step, CopyRows):
            return await super().perform(step, connection)
        async with connection.cursor() as cursor, cursor.copy(step.statement) as copy:
            copy.set_types(step.types)
            for row in step.rows:
                await copy.write_row(row)
        return None

    async def run_together(self, steps: Steps[T], connection: Any) -> T:
        if not outside_transaction(connection):
            return await self.run(steps, connection)
        async with connection.transaction():
            return await self.run(steps, connection)

    async def watch(self, job_id: int) -> asyncio.Event | None:
        event = await self.wakeups.add(job_id)
        try:
            # Once listening, as Queue.wait marks it: an end committed after the mark is told.
            await self.own("wait", lambda: count(MARK_WAITED, {"id": job_id}))
        except BaseException:
            self.wakeups.remove(job_id, event)
            raise
        return event

    async def unwatch(self, job_id: int, event: asyncio.Event) -> None:
        self.wakeups.remove(job_id, event)


class Wakeups:
    """One listening connection for all of a queue's waiters, opened on the first wait: a
    task reads its notifications and sets the events of the waiters of each job named.

    Its own connection, because a connection waiting for notifications is busy: on the
    queue's, every enqueue would wait behind it."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.waiters: dict[int, set[asyncio.Event]] = {}
        self.connection: psycopg.AsyncConnection[Any] | None = None
        self.reader: asyncio.Task[None] | None = None
        self.opening = asyncio.Lock()

    async def add(self, job_id: int) -> asyncio.Event:
        async with self.opening:
            if self.reader is None or self.reader.done():
                await self.close()
                self.connection = await psycopg.AsyncConnection.connect(
                    libpq_dsn(self.dsn), autocommit=True, **application_name(self.dsn)
                )
                await self.connection.execute(f"LISTEN {FINISHED_CHANNEL}")
                self.reader = asyncio.create_task(self.read(self.connection))
        event = asyncio.Event()
        self.waiters.setdefault(job_id, set()).add(event)
        return event

    def remove(self, job_id: int, event: asyncio.Event) -> None:
        events = self.waiters.get(job_id, set())
        events.discard(event)
        if not events:
            self.waiters.pop(job_id, None)

    async def read(self, connection: psycopg.AsyncConnection[Any]) -> None:
        # Should the connection fail, the reader ends; waiters read the row on their own
        # schedule meanwhile, and the next wait() listens again.
        async for note in connection.notifies():
            if note.payload.isdigit():
                for event in self.waiters.get(int(note.payload), ()):
                    event.set()

    async def close(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, psycopg.Error):
                await self.reader
        if self.connection is not None:
            await self.connection.close()
        self.reader = self.connection = None
