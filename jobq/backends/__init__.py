"""Chooses a backend from a DSN or from a connection the application already has.

This is the only place that maps database kinds to modules; drivers are imported on demand,
so an SQLite user needs neither psycopg nor PyMySQL.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..dsn import refuse_unencoded, scheme_of, scrub
from ..errors import ConfigurationError
from .asynchronous import AsyncDriver
from .base import Backend

SCHEMES = {
    "postgresql": "postgresql",
    "postgres": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
    "sqlite": "sqlite",
}


# The extra that installs each database's driver.
EXTRAS = {"postgresql": ("psycopg", "postgresql"), "mysql": ("pymysql", "mysql")}


def missing(error: ModuleNotFoundError, needed: tuple[str, str], who: str) -> Exception:
    """What to raise for a module that failed to import: where it was the driver `needed`
    names, an error that says which extra installs it; any other, the error itself."""
    driver, extra = needed
    if error.name != driver:
        return error
    return ConfigurationError(
        f"{who} need the {driver} driver, which is not installed: pip install 'jobq[{extra}]'"
    )


def backend_class(kind: str) -> type[Backend]:
    try:
        if kind == "postgresql":
            from .postgresql import PostgresBackend

            return PostgresBackend
        if kind == "mysql":
            from .mysql import MysqlBackend

            return MysqlBackend
    except ModuleNotFoundError as error:
        raise missing(error, EXTRAS[kind], f"{kind} DSNs") from None
    from .sqlite import SqliteBackend

    return SqliteBackend


def for_dsn(dsn: str) -> type[Backend]:
    """The backend a DSN names, its driver imported: a bad scheme or a missing driver is a
    ConfigurationError that says what to do."""
    kind = SCHEMES.get(scheme_of(dsn))
    if kind is None:
        raise ConfigurationError(
            f"unsupported DSN {scrub(dsn, dsn)!r}: the scheme must be one of "
            f"{', '.join(sorted(SCHEMES))}"
        )
    refuse_unencoded(dsn)
    return backend_class(kind)


def connect(dsn: str, listen_dsn: str | None = None, create: bool = True) -> Backend:
    """A backend on a connection of its own. `listen_dsn` (PostgreSQL only) is a direct
    connection for wake-ups, when `dsn` goes through a transaction pooler. create=False:
    never create the database itself (only an embedded one can be created by connecting);
    a missing one is NoSchema."""
    backend = for_dsn(dsn)
    if listen_dsn is None:
        return backend.connect(dsn, create=create)  # type: ignore[attr-defined, no-any-return]
    if {SCHEMES.get(scheme_of(each)) for each in (dsn, listen_dsn)} != {"postgresql"}:
        raise ConfigurationError(
            "a listen DSN is for wake-ups from PostgreSQL: both DSNs must be postgresql://"
        )
    return backend.connect(dsn, listen_dsn=listen_dsn)  # type: ignore[attr-defined, no-any-return]


# The extra that installs each database's asyncio driver, for jobq.AsyncQueue.
ASYNC_EXTRAS = {
    "postgresql": ("psycopg", "async-postgresql"),
    "mysql": ("aiomysql", "async-mysql"),
    "sqlite": ("aiosqlite", "async-sqlite"),
}


async def connect_async(dsn: str) -> AsyncDriver:
    """An async driver on a connection of its own, for the database the DSN names."""
    kind = for_dsn(dsn).kind  # a bad scheme or a missing sync driver is said as for Queue
    try:
        module = importlib.import_module(f".{kind}.asynchronous", __name__)
    except ModuleNotFoundError as error:
        raise missing(error, ASYNC_EXTRAS[kind], f"jobq.AsyncQueue's {kind} DSNs") from None
    driver: AsyncDriver = await module.connect(dsn)
    return driver


def unwrap(connection: Any) -> Any:
    """The DB-API connection an application handed jobq.

    An ORM's connection wrapper (Django's `connection` or `connections[alias]`) is taken for
    the driver's connection it holds, connected first if need be: that is still the
    application's session and transaction. Recognised by its shape, so jobq never imports an
    ORM. Anything else is returned as it is.
    """
    if connection is None:
        raise TypeError(
            "connection=None: pass the application's connection, or leave connection out to "
            "use the queue's own (an ORM's wrapper may hold None until it connects: pass the "
            "wrapper itself, e.g. django.db.connection)"
        )
    if callable(getattr(connection, "ensure_connection", None)) and hasattr(
        connection, "connection"
    ):
        connection.ensure_connection()
        return connection.connection
    return connection


def wrap(connection: Any) -> Backend:
    """A backend over an application's own connection, which it will not close."""
    connection = unwrap(connection)
    driver = type(connection).__module__.split(".", 1)[0]
    kind = {"psycopg": "postgresql", "pymysql": "mysql", "sqlite3": "sqlite"}.get(driver)
    if kind is None:
        raise ConfigurationError(
            f"cannot use a {type(connection).__module__}.{type(connection).__name__}: jobq "
            "takes psycopg 3, PyMySQL and sqlite3 connections"
        )
    return backend_class(kind)(connection, owns_connection=False)
