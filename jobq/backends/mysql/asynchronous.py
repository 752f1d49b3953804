"""MySQL and MariaDB for jobq.AsyncQueue: aiomysql (PyMySQL's protocol and escaping on
asyncio, so the statements MysqlBackend declares run unchanged and fail with PyMySQL's own
errors), running the statements MysqlBackend declares."""

from __future__ import annotations

import aiomysql
from pymysql.constants import CLIENT

from ..asynchronous import AsyncDriver
from . import MysqlBackend, connect_args


async def connect(dsn: str) -> MysqlAsyncDriver:
    args = connect_args(dsn)
    args["db"] = args.pop("database")
    # FOUND_ROWS, as the sync backend connects: rowcount counts matched rows.
    connection = await aiomysql.connect(**args, autocommit=True, client_flag=CLIENT.FOUND_ROWS)
    returning = "mariadb" in str(connection.get_server_info()).lower()
    return MysqlAsyncDriver(MysqlBackend.detached(returning=returning), connection)


class MysqlAsyncDriver(AsyncDriver):
    begin = ("SET TRANSACTION ISOLATION LEVEL READ COMMITTED", "BEGIN")

    async def close(self) -> None:
        await self.connection.ensure_closed()
