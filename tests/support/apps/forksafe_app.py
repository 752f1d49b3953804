"""An application that opens database connections when it is imported, as real ones do: a
driver connection, a psycopg_pool pool (PostgreSQL) and a Django connection.

Loaded by workers as `forksafe_app` (the tests put this folder on PYTHONPATH), with
FORKSAFE_DSN naming the database and FORKSAFE_JOURNAL the journal. Every ReadOwn job reads its
own row through each connection and fails if it gets another's.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import django
import psycopg
from django.conf import settings
from django.db import connection as django_connection
from psycopg_pool import ConnectionPool

import jobq
from jobq.backends.sqlite import path_of
from jobq.testing.history import journal_event

DSN = os.environ["FORKSAFE_DSN"]
JOURNAL = os.environ["FORKSAFE_JOURNAL"]
POSTGRESQL = DSN.startswith("postgresql:")
OPENED_BY = os.getpid()

# A reader takes (sql with %s, params) and returns the first column of the first row.
Reader = Callable[[str, tuple[Any, ...]], Any]


def write(event: str, **fields: object) -> None:
    journal_event(JOURNAL, event, **fields)


def django_database(dsn: str) -> dict[str, Any]:
    if not POSTGRESQL:
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": path_of(dsn)}
    url = urlsplit(dsn)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": url.path.lstrip("/"),
        "USER": url.username,
        "HOST": url.hostname,
        "PORT": url.port,
    }


def open_readers() -> dict[str, Reader]:
    settings.configure(DATABASES={"default": django_database(DSN)}, INSTALLED_APPS=[])
    django.setup()
    django_connection.ensure_connection()

    def through_django(sql: str, params: tuple[Any, ...]) -> Any:
        with django_connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone()[0]

    readers: dict[str, Reader] = {"django": through_django}
    if POSTGRESQL:
        plain = psycopg.connect(DSN, autocommit=True)
        pool = ConnectionPool(DSN, min_size=1, max_size=1, kwargs={"autocommit": True})
        pool.wait(timeout=10)

        def through_pool(sql: str, params: tuple[Any, ...]) -> Any:
            with pool.connection() as pooled:
                row = pooled.execute(sql, params).fetchone()
                assert row is not None
                return row[0]

        readers["psycopg"] = lambda sql, params: plain.execute(sql, params).fetchone()[0]  # type: ignore[index]
        readers["pool"] = through_pool
    else:
        plain_sqlite = sqlite3.connect(path_of(DSN), isolation_level=None, check_same_thread=False)
        readers["sqlite3"] = lambda sql, params: plain_sqlite.execute(
            sql.replace("%s", "?"), params
        ).fetchone()[0]
    return readers


READERS = open_readers()
# A warm-up query on each, as an application checking its database at import would make.
for read in READERS.values():
    read("SELECT 1", ())
write("imported")


class ReadOwn(jobq.Job):
    """Reads its own row through every connection the module opened."""

    job_name = "ReadOwn"
    type = "read_own"

    def __init__(self, row: int, token: str) -> None:
        self.row = row
        self.token = token

    def handle(self) -> None:
        seen = {}
        for name, reader in READERS.items():
            seen[name] = reader("SELECT token FROM forksafe_rows WHERE id = %s", (self.row,))
            if POSTGRESQL:
                seen[f"{name}_backend"] = reader("SELECT pg_backend_pid()", ())
            time.sleep(0.001)  # widen the window in which a shared socket would interleave
        write("read", row=self.row, token=self.token, seen=seen, opened_by=OPENED_BY)
        wrong = {name: token for name, token in seen.items() if "backend" not in name}
        wrong = {name: token for name, token in wrong.items() if token != self.token}
        if wrong:
            raise AssertionError(f"row {self.row} read another's token: {wrong}")
