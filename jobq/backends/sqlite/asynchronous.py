"""SQLite for jobq.AsyncQueue: aiosqlite, which runs sqlite3 on a thread of its own per
connection, running the statements SqliteBackend declares."""

from __future__ import annotations

import sqlite3
from typing import Any

import aiosqlite

from ..asynchronous import AsyncDriver
from ..steps import Statement, Step, fetched_async
from . import SqliteBackend, path_of


async def connect(dsn: str) -> SqliteAsyncDriver:
    SqliteBackend.check_version()
    backend = SqliteBackend.detached()
    # isolation_level=None: autocommit, as the sync backend's; transactions are jobq's own.
    connection = await aiosqlite.connect(path_of(dsn), timeout=5.0, isolation_level=None)
    try:
        await connection.execute("PRAGMA journal_mode=WAL")
    except sqlite3.OperationalError as error:
        # Another process switching the file at once: it switches it for everybody.
        if not backend.is_transient(error):
            await connection.close()
            raise
    return SqliteAsyncDriver(backend, connection)


class SqliteAsyncDriver(AsyncDriver):
    # IMMEDIATE: take the write lock up front, as the sync backend's transactions do.
    begin = ("BEGIN IMMEDIATE",)

    async def perform(self, step: Step, connection: Any) -> Any:
        # Each aiosqlite call is a hop to its thread and back: execute() makes the cursor
        # in the same hop, where cursor() then execute() take two.
        assert isinstance(step, Statement), "only PostgreSQL copies rows"
        async with connection.execute(step.sql, step.params) as cursor:
            return await fetched_async(cursor, step.fetch)
