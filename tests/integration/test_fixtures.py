"""Checks of the conftest fixtures themselves, using the drivers directly rather than jobq."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pymysql
import pytest

SEEN: set[str] = set()
COUNT_TABLES = {
    "sqlite": "SELECT count(*) FROM sqlite_master",
    "postgresql": "SELECT count(*) FROM information_schema.tables"
    " WHERE table_schema NOT IN ('pg_catalog', 'information_schema')",
    "mariadb": "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE()",
}


@contextmanager
def connect(dsn: str) -> Iterator[Any]:
    url = urlsplit(dsn)
    if url.scheme == "sqlite":
        conn: Any = sqlite3.connect(url.path[1:])  # sqlite:////abs/path -> /abs/path
    elif url.scheme == "postgresql":
        conn = psycopg.connect(
            host=url.hostname, port=url.port, user=url.username, dbname=url.path[1:]
        )
    else:
        assert url.scheme == "mysql"
        assert url.port is not None
        conn = pymysql.connect(
            host=url.hostname, port=url.port, user=url.username, password="", database=url.path[1:]
        )
    with closing(conn):
        yield conn


@pytest.mark.parametrize("round_", [1, 2])
def test_each_test_gets_a_fresh_empty_database(dsn: str, db_kind: str, round_: int) -> None:
    assert dsn not in SEEN
    SEEN.add(dsn)
    with connect(dsn) as conn:
        cur = conn.cursor()
        cur.execute(COUNT_TABLES[db_kind])
        assert cur.fetchone()[0] == 0
        # Left behind on purpose: the other round would see it if databases were shared.
        cur.execute("CREATE TABLE leftover (id INTEGER PRIMARY KEY)")
        conn.commit()


@pytest.mark.databases("postgresql", "mariadb")
def test_databases_marker_restricts_kinds(dsn: str, db_kind: str) -> None:
    assert db_kind != "sqlite"
    assert urlsplit(dsn).scheme == {"postgresql": "postgresql", "mariadb": "mysql"}[db_kind]


def test_single_server_fixtures(postgresql_dsn: str, mariadb_dsn: str) -> None:
    for dsn in (postgresql_dsn, mariadb_dsn):
        with connect(dsn) as conn:
            cur = conn.cursor()
            cur.execute("SELECT 1")
            assert cur.fetchone()[0] == 1
