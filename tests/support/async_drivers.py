"""Raw async driver connections for tests that play an asyncio application's side."""

from __future__ import annotations

from typing import Any

import aiomysql
import aiosqlite
import psycopg

from jobq.backends.mysql.dsn import connect_args
from jobq.backends.sqlite import path_of


async def connect(dsn: str, db_kind: str) -> Any:
    """The application's own async connection, in autocommit mode until it begins."""
    if db_kind == "postgresql":
        return await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    if db_kind == "mariadb":
        args = connect_args(dsn)
        args["db"] = args.pop("database")
        return await aiomysql.connect(**args, autocommit=True)
    return await aiosqlite.connect(path_of(dsn), isolation_level=None)


async def begin(connection: Any, db_kind: str) -> None:
    if db_kind == "mariadb":
        await connection.begin()
    else:
        await connection.execute("BEGIN IMMEDIATE" if db_kind == "sqlite" else "BEGIN")


async def execute(connection: Any, sql: str) -> None:
    """One statement without parameters, on any of the three drivers."""
    async with connection.cursor() as cursor:
        await cursor.execute(sql)


async def close(connection: Any, db_kind: str) -> None:
    if db_kind == "mariadb":
        await connection.ensure_closed()
    else:
        await connection.close()
