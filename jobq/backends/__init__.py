"""Chooses a backend from a DSN or from a connection the application already has.

This is the only place that maps database kinds to modules; drivers are imported on demand,
so an SQLite user needs neither psycopg nor PyMySQL.
"""

from __future__ import annotations

from typing import Any

from ..dsn import redact, scheme_of
from ..errors import ConfigurationError
from .base import Backend

SCHEMES = {
    "postgresql": "postgresql",
    "postgres": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
    "sqlite": "sqlite",
}


def backend_class(kind: str) -> type[Backend]:
    if kind == "postgresql":
        from .postgresql import PostgresBackend

        return PostgresBackend
    if kind == "mysql":
        from .mysql import MysqlBackend

        return MysqlBackend
    from .sqlite import SqliteBackend

    return SqliteBackend


def connect(dsn: str, listen_dsn: str | None = None) -> Backend:
    """A backend on a connection of its own; `listen_dsn` (PostgreSQL only) is a direct
    connection for wake-ups, when `dsn` goes through a transaction pooler."""
    scheme = scheme_of(dsn)
    kind = SCHEMES.get(scheme)
    if kind is None:
        raise ConfigurationError(
            f"unsupported DSN {redact(dsn)!r}: the scheme must be one of "
            f"{', '.join(sorted(SCHEMES))}"
        )
    if listen_dsn is None:
        return backend_class(kind).connect(dsn)  # type: ignore[attr-defined, no-any-return]
    if kind != "postgresql" or SCHEMES.get(scheme_of(listen_dsn)) != "postgresql":
        raise ConfigurationError(
            "a listen DSN is for wake-ups from PostgreSQL: both DSNs must be postgresql://"
        )
    from .postgresql import PostgresBackend

    return PostgresBackend.connect(dsn, listen_dsn)


def wrap(connection: Any) -> Backend:
    """A backend over an application's own connection, which it will not close."""
    driver = type(connection).__module__.split(".", 1)[0]
    kind = {"psycopg": "postgresql", "pymysql": "mysql", "sqlite3": "sqlite"}.get(driver)
    if kind is None:
        raise ConfigurationError(
            f"cannot use a {type(connection).__module__}.{type(connection).__name__}: jobq "
            "takes psycopg 3, PyMySQL and sqlite3 connections"
        )
    return backend_class(kind)(connection, owns_connection=False)
