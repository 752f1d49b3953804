"""Queue.horizon(): what holds back the database's cleanup of the rows jobs leave dead, read
while another session holds an old snapshot, on each database."""

from __future__ import annotations

from typing import Any

import pytest

import jobq
from tests.support import drivers
from tests.support.jobs import Noop

# Jobs run while the snapshot is held: each leaves rows the held snapshot keeps alive.
RUN_WHILE_HELD = 20


def hold_snapshot(connection: Any, db_kind: str) -> None:
    """Open a transaction and read, as a report or a dump does: its snapshot is taken."""
    if db_kind == "postgresql":
        connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        connection.execute("SELECT count(*) FROM jobq_jobs").fetchone()
    elif db_kind == "mariadb":
        with connection.cursor() as cursor:
            cursor.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cursor.execute("SELECT count(*) FROM jobq_jobs")
            cursor.fetchone()
    else:
        connection.execute("BEGIN")
        connection.execute("SELECT count(*) FROM jobq_jobs").fetchone()


def run_jobs(queue: jobq.Queue, count: int) -> None:
    for _ in range(count):
        queue.enqueue(Noop())
    assert queue.process_jobs(count) == count


@pytest.mark.databases("postgresql", "mariadb", "sqlite")
def test_a_held_snapshot_shows_as_the_horizon_s_holder_with_its_age_and_backlog(
    queue: jobq.Queue, dsn: str, db_kind: str
) -> None:
    run_jobs(queue, 1)
    reader = drivers.connect(dsn, db_kind, autocommit=True)
    try:
        hold_snapshot(reader, db_kind)
        run_jobs(queue, RUN_WHILE_HELD)
        held = queue.horizon()
    finally:
        reader.rollback()
        reader.close()
    released = queue.horizon()
    assert held.backlog is not None
    assert held.backlog > 0, held
    if db_kind == "sqlite":
        # SQLite cannot name a reader nor time it: the WAL it keeps is what shows.
        assert (held.holder, held.age) == (None, None)
        run_jobs(queue, 1)
        assert queue.horizon().backlog == 0, "checkpointed once the reader is gone"
        return
    assert held.age is not None
    assert held.age >= 0
    assert held.holder is not None
    pid = "pid" if db_kind == "postgresql" else "thread"
    assert held.holder.startswith(f"{pid} "), held
    assert released.holder != held.holder, released
