"""Queue.horizon(): what holds back the database's cleanup of the rows jobs leave dead, read
while another session holds an old snapshot, on each database."""

from __future__ import annotations

import pytest

import jobq
from tests.support import drivers
from tests.support.jobs import Noop

# Jobs run while the snapshot is held: each leaves rows the held snapshot keeps alive.
RUN_WHILE_HELD = 20


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
        drivers.hold_snapshot(reader, db_kind)
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
