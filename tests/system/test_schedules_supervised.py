"""Periodic jobs under real supervisors: three of them on one database, a 1 s schedule,
every slot enqueued exactly once and none missed, across a restart."""

from __future__ import annotations

import itertools
import signal
from datetime import datetime, timedelta

import pytest

import jobq
from tests.support.supervising import FAST, Supervisor, supervisor
from tests.support.waiting import wait_for

# One worker each: the schedule's jobs are trivial, and three supervisors share two cores.
ARGS = (*FAST, "--workers", "1", "--app", "schedules_app")

# About 20 s of a 1 s schedule.
SLOTS = 20


pytestmark = pytest.mark.lease(60)


def slots(queue: jobq.Queue) -> list[datetime]:
    """The slot of every job the 1 s schedule enqueued: its scheduled_at."""
    backend = queue.backend
    rows = backend.fetchall("SELECT scheduled_at FROM jobq_jobs WHERE type = 'tick'")
    return sorted(backend.to_datetime(row[0]) for row in rows)


def drain(running: Supervisor) -> None:
    running.signal(signal.SIGTERM)
    assert running.wait() == 0, running.log


@pytest.mark.timeout(240)
def test_three_supervisors_take_every_slot_once_across_a_restart(
    queue: jobq.Queue, dsn: str
) -> None:
    with supervisor(dsn, *ARGS) as first, supervisor(dsn, *ARGS) as second:
        with supervisor(dsn, *ARGS) as third:
            wait_for("half the slots", lambda: len(slots(queue)) >= SLOTS // 2, timeout=90)
            drain(third)
        # Restarted while the other two run on: it takes its share again, and no slot twice.
        with supervisor(dsn, *ARGS) as restarted:
            wait_for("all the slots", lambda: len(slots(queue)) >= SLOTS, timeout=90)
            drain(restarted)
        drain(first)
        drain(second)
    taken = slots(queue)
    assert len(set(taken)) == len(taken), "a slot was enqueued twice"
    gaps = [b - a for a, b in itertools.pairwise(taken)]
    assert set(gaps) == {timedelta(seconds=1)}, f"slots missed: {taken}"


def housekeepers(running: Supervisor) -> list[int]:
    return [pid for pid, title in running.titles().items() if title.endswith("housekeeper")]


@pytest.mark.databases("sqlite")
def test_a_reload_starts_a_housekeeper_that_imports_the_new_code(
    queue: jobq.Queue, dsn: str
) -> None:
    with supervisor(dsn, *ARGS) as running:
        old = wait_for("the housekeeper", lambda: housekeepers(running))
        running.signal(signal.SIGHUP)
        wait_for("a new housekeeper, alone", lambda: housekeepers(running) not in ([], old))
        wait_for("the old one gone", lambda: not set(old) & set(housekeepers(running)))
        count = len(slots(queue))
        wait_for("slots taken after the reload", lambda: len(slots(queue)) > count + 1)
        drain(running)
    assert "The housekeeper is not running" not in running.log
