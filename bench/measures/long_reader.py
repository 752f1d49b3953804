"""Claims behind a long reader on any of jobq's databases: one process claims and completes
in batches, as a worker does, a baseline round, then rounds while another session holds a
read transaction open (PostgreSQL: a REPEATABLE READ snapshot; MariaDB: a consistent
snapshot, which keeps purge from the undo logs, so the history list grows; SQLite: a read
transaction, which keeps checkpoints from resetting the WAL, so it grows).

Not a section of the run: `python -m bench.measures.long_reader DSN [JOBS] [ROUNDS]` on a
database of its own. Each line gives the round's rate and what the reader holds back:
Queue.horizon()'s backlog (PostgreSQL: dead rows; MariaDB: the history list length;
SQLite: WAL pages not yet checkpointed). One process, no supervisor: it measures the claims'
statements, not a worker's overheads.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import jobq
from bench.harness.app import Noop
from jobq.backends.sqlite import path_of

BATCH = 100


def reader(dsn: str, kind: str) -> Any:
    """A session that holds a read transaction open, as a report or a dump does."""
    if kind == "postgresql":
        import psycopg

        connection: Any = psycopg.connect(dsn, autocommit=True)
        connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        connection.execute("SELECT count(*) FROM jobq_jobs")
        return connection
    if kind == "mysql":
        import pymysql

        from jobq.backends.mysql.dsn import connect_args

        connection = pymysql.connect(**connect_args(dsn), autocommit=True)
        with connection.cursor() as cursor:
            cursor.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cursor.execute("SELECT count(*) FROM jobq_jobs")
            cursor.fetchall()
        return connection
    import sqlite3

    connection = sqlite3.connect(path_of(dsn), isolation_level=None)
    connection.execute("BEGIN")
    connection.execute("SELECT count(*) FROM jobq_jobs").fetchall()
    return connection


def drained(queue: jobq.Queue, jobs: int) -> float:
    """Enqueue `jobs` no-op jobs, then claim and complete them all: the jobs/s of the latter."""
    queue.enqueue_many([Noop() for _ in range(jobs)])
    started = time.perf_counter()
    claims, done = queue.claim_many(BATCH), 0
    while claims:
        done += len(claims)
        _, claims = queue.complete_many_and_claim(claims, BATCH)
    return done / (time.perf_counter() - started)


def main(dsn: str, jobs: int, rounds: int) -> None:
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        kind = queue.backend.kind
        baseline = drained(queue, jobs)
        print(f"{kind}, {jobs:,} jobs a round; baseline: {baseline:,.0f} jobs/s", flush=True)
        held = reader(dsn, kind)
        try:
            for number in range(1, rounds + 1):
                rate = drained(queue, jobs)
                behind = queue.horizon().backlog
                print(
                    f"  held round {number}: {rate:,.0f} jobs/s ({rate / baseline:.2f}x), "
                    f"backlog behind the reader {behind}",
                    flush=True,
                )
        finally:
            held.rollback()
            held.close()


if __name__ == "__main__":
    dsn, *sized = sys.argv[1:]
    main(dsn, int(sized[0]) if sized else 20_000, int(sized[1]) if len(sized) > 1 else 5)
