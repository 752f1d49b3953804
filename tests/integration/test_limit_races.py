"""PostgreSQL's limit triggers under interleavings replayed step by step with explicit
transactions: an ending wakes a blocked job even while a concurrent claim holds that job's
row lock."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest

import jobq
from tests.support.jobs import Limited
from tests.support.waiting import wait_for

pytestmark = pytest.mark.databases("postgresql")


@pytest.fixture
def other(dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(dsn) as connection:
        yield connection


def waiting_on_a_lock(queue: jobq.Queue, pid: int) -> bool:
    """Whether the server process `pid` waits for a lock now."""
    row = queue.backend.fetchone(
        "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %(pid)s",
        {"pid": pid},
    )
    return bool(row and row[0])


def test_an_ending_wakes_a_job_a_failed_recheck_holds(
    queue: jobq.Queue, dsn: str, other: psycopg.Connection[tuple[object, ...]]
) -> None:
    """A claim whose snapshot predates a job's block reaches its row after the blocking claim
    committed: READ COMMITTED locks the row's new version, finds it no longer ready and steps
    over it, yet keeps the lock until it commits. An ending of the key meanwhile must not
    skip that row for good: it waits for it, and the job is woken."""
    queue.set_limit("limited", 1)
    running = queue.enqueue(Limited("a", 0))
    later = queue.enqueue(Limited("a", 1))
    held = queue.claim()
    assert held is not None
    assert held.id == running
    # The concurrent claim's probe: its snapshot is the cursor's, taken before the block.
    other.execute(
        "DECLARE probe CURSOR FOR SELECT id FROM jobq_jobs WHERE status = 'pending' "
        "AND blocked_on IS NULL ORDER BY id FOR UPDATE SKIP LOCKED"
    )
    assert queue.claim() is None
    assert [job.id for job in queue.blocked()] == [later]
    assert other.execute("FETCH 1 FROM probe").fetchall() == []

    ending = threading.Thread(target=queue.complete, args=(held,))
    pid = queue.backend.connection.info.backend_pid
    with jobq.Queue.connect(dsn) as watcher:
        ending.start()
        wait_for(
            "the ending to wait for the row or to finish",
            lambda: not ending.is_alive() or waiting_on_a_lock(watcher, pid),
        )
    other.commit()
    ending.join(15)
    assert not ending.is_alive()
    assert queue.blocked() == []
    claim = queue.claim()
    assert claim is not None
    assert claim.id == later
