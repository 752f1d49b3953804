"""SQLite for jobq.AsyncQueue: aiosqlite, which runs sqlite3 on a thread of its own per
connection, running the statements SqliteBackend declares."""

from __future__ import annotations

import sqlite3

import aiosqlite

from ..asynchronous import AsyncDriver
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
