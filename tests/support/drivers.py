"""Raw driver connections for tests that play the application's side of a database."""

from __future__ import annotations

import sqlite3
from typing import Any

import psycopg
import pymysql

from jobq.backends.mysql.dsn import connect_args
from jobq.backends.sqlite import path_of


def connect(dsn: str, db_kind: str, *, autocommit: bool) -> Any:
    if db_kind == "postgresql":
        return psycopg.connect(dsn, autocommit=autocommit)
    if db_kind == "mariadb":
        return pymysql.connect(**connect_args(dsn), autocommit=autocommit)
    return sqlite3.connect(
        path_of(dsn), isolation_level=None if autocommit else "DEFERRED", check_same_thread=False
    )


def begin(connection: Any, db_kind: str) -> None:
    """Open a transaction on an autocommit connection, the way each driver does it."""
    if db_kind == "postgresql":
        connection.execute("BEGIN")
    elif db_kind == "mariadb":
        connection.begin()
    else:
        connection.execute("BEGIN IMMEDIATE")


def lock_job_row(connection: Any, db_kind: str, job_id: int) -> None:
    """Hold a lock that keeps other sessions from writing the job's row until rollback."""
    begin(connection, db_kind)
    if db_kind == "sqlite":
        return  # BEGIN IMMEDIATE already holds the database's write lock
    marker = "%s"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM jobq_jobs WHERE id = {marker} FOR UPDATE", (job_id,))


# What makes a blocked statement give up quickly, as a loaded production database might.
SHORT_LOCK_WAITS = {
    "postgresql": "SET lock_timeout = '300ms'",
    "mariadb": "SET SESSION innodb_lock_wait_timeout = 1",
    "sqlite": "PRAGMA busy_timeout = 300",
}


def shorten_lock_waits(connection: Any, db_kind: str) -> None:
    cursor = connection.cursor()
    cursor.execute(SHORT_LOCK_WAITS[db_kind])
    cursor.close()


def hold_snapshot(connection: Any, db_kind: str) -> str | None:
    """Open a transaction on an autocommit connection and read, as a report or a dump does,
    so that its snapshot holds back the database's cleanup; how Queue.horizon() names this
    session (None on SQLite, which names no reader)."""
    cursor = connection.cursor()
    holder = None
    if db_kind == "postgresql":
        cursor.execute("SELECT pg_backend_pid()")
        holder = f"pid {cursor.fetchone()[0]} "
        cursor.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    elif db_kind == "mariadb":
        cursor.execute("SELECT CONNECTION_ID()")
        holder = f"thread {cursor.fetchone()[0]} "
        cursor.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
    else:
        cursor.execute("BEGIN")
    cursor.execute("SELECT count(*) FROM jobq_jobs")
    cursor.fetchone()
    cursor.close()
    return holder
