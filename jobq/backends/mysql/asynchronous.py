"""MySQL and MariaDB for jobq.AsyncQueue: aiomysql (PyMySQL's protocol and escaping on
asyncio, so the statements MysqlBackend declares run unchanged and fail with PyMySQL's own
errors), running the statements MysqlBackend declares."""

from __future__ import annotations

from typing import Any

import aiomysql
from pymysql.constants import CLIENT

from ..asynchronous import AsyncDriver
from ..naming import connection_name
from ..steps import Statement, Step
from . import BEGIN, MysqlBackend
from .dsn import connect_args


async def connect(dsn: str) -> MysqlAsyncDriver:
    args = connect_args(dsn)
    args["db"] = args.pop("database")
    # FOUND_ROWS, as the sync backend connects: rowcount counts matched rows.
    connection = await aiomysql.connect(
        **args, autocommit=True, client_flag=CLIENT.FOUND_ROWS, program_name=connection_name()
    )
    returning = "mariadb" in str(connection.get_server_info()).lower()
    return MysqlAsyncDriver(MysqlBackend.detached(returning=returning), connection)


class MysqlAsyncDriver(AsyncDriver):
    begin = BEGIN

    async def perform(self, step: Step, connection: Any) -> Any:
        # aiomysql 0.3.2 escapes bytes with a helper that PyMySQL 1.2.3 replaced by a string,
        # so any bytes parameter (a unique key, see MysqlBackend.key_params) raises TypeError
        # (aiomysql issue 1080). So the statement is formatted here, as aiomysql's own
        # cursor formats it, with bytes escaped as PyMySQL 1.2 escapes them.
        if isinstance(step, Statement) and isinstance(step.params, dict):
            escaped = {name: escape(connection, value) for name, value in step.params.items()}
            step = Statement(step.sql % escaped, None, step.fetch)
        return await super().perform(step, connection)

    def cursor(self, connection: Any) -> Any:
        return connection.cursor(QuietCursor)

    async def close(self) -> None:
        await self.connection.ensure_closed()


class QuietCursor(aiomysql.Cursor):  # type: ignore[misc]
    """A cursor that leaves the server's warnings alone, as PyMySQL's does: aiomysql's asks
    for them after each statement that had some (one more round trip) and turns them into
    Python warnings, such as an INSERT IGNORE's duplicate key when a paused type is paused."""

    async def _show_warnings(self, conn: Any) -> None:
        pass


def escape(connection: Any, value: Any) -> str:
    if isinstance(value, bytes):
        return f"_binary X'{value.hex()}'"
    return str(connection.escape(value))
