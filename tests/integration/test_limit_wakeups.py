"""On PostgreSQL, an ending that frees a slot wakes idle workers (NOTIFY) only while some
worker is marked idle, and a worker marking itself idle waits for the endings that could
not see its mark, so that its last claim before it waits finds the jobs they woke."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest

import jobq
from jobq.records import ClaimedJob
from tests.support.jobs import Limited
from tests.support.waiting import wait_for

pytestmark = pytest.mark.databases("postgresql")


@pytest.fixture
def idle(dsn: str) -> Iterator[jobq.Queue]:
    """Another worker's connection, listening for wake-ups."""
    with jobq.Queue.connect(dsn) as worker:
        yield worker


def blocked_behind_one(queue: jobq.Queue, jobs: int) -> tuple[ClaimedJob, list[int]]:
    """`jobs` jobs of one key at a limit of 1: the first claimed, the others blocked."""
    queue.set_limit("limited", 1)
    ids = [queue.enqueue(Limited("a", i)) for i in range(jobs)]
    claim = queue.claim()
    assert claim is not None
    assert claim.id == ids[0]
    assert queue.claim() is None
    assert sorted(job.id for job in queue.blocked()) == ids[1:]
    return claim, ids[1:]


def test_an_ending_wakes_idle_workers_only_while_one_is_marked(
    queue: jobq.Queue, idle: jobq.Queue
) -> None:
    first, (second, third) = blocked_behind_one(queue, 3)
    assert idle._listen()
    assert queue.complete(first)
    assert [job.id for job in queue.blocked()] == [third]
    assert not idle._wait_for_jobs(0.5), "a wake-up with no worker idle"

    running = queue.claim()
    assert running is not None
    assert running.id == second
    assert idle._mark_idle()
    assert not idle._mark_idle(), "marked twice"
    assert queue.complete(running)
    assert queue.blocked() == []
    assert idle._wait_for_jobs(10), "no wake-up for the idle worker"
    last = idle.claim()
    assert last is not None
    assert last.id == third
    idle._unmark_idle()


def test_a_worker_marking_itself_idle_waits_for_an_ending_that_did_not_see_the_mark(
    queue: jobq.Queue, idle: jobq.Queue, dsn: str
) -> None:
    first, (second,) = blocked_behind_one(queue, 2)
    with psycopg.connect(dsn) as ending:
        # The ending woke the job and looked for idle workers, but has not committed.
        ending.execute(
            "UPDATE jobq_jobs SET status = 'completed', token = NULL, lease_until = NULL, "
            "finished_at = now() WHERE id = %(id)s",
            {"id": first.id},
        )
        assert idle._listen()
        marking = threading.Thread(target=idle._mark_idle)
        pid = idle.backend.connection.info.backend_pid
        marking.start()
        wait_for("the mark to wait for the ending", lambda: waiting_on_a_lock(queue, pid))
        assert marking.is_alive()
        ending.commit()
    marking.join(15)
    assert not marking.is_alive()
    claim = idle.claim()
    assert claim is not None
    assert claim.id == second


def waiting_on_a_lock(queue: jobq.Queue, pid: int) -> bool:
    row = queue.backend.fetchone(
        "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %(pid)s",
        {"pid": pid},
    )
    return bool(row and row[0])
