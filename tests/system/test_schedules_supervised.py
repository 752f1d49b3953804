"""Periodic jobs under real supervisors: three of them on one database, a 1 s schedule,
every slot enqueued exactly once and none missed, across a restart; old and new code side
by side, the new code's spec running; and a housekeeper frozen past a slot taking it late."""

from __future__ import annotations

import itertools
import os
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


def slots(queue: jobq.Queue, job_type: str = "tick") -> list[datetime]:
    """The slot of every job a schedule enqueued (by default the 1 s one): its scheduled_at."""
    backend = queue.backend
    placeholder = backend.placeholder.format("type")
    sql = f"SELECT scheduled_at FROM jobq_jobs WHERE type = {placeholder}"
    rows = backend.fetchall(sql, {"type": job_type})
    return sorted(backend.to_datetime(row[0]) for row in rows)


def gaps(taken: list[datetime]) -> set[timedelta]:
    return {b - a for a, b in itertools.pairwise(taken)}


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
    assert gaps(taken) == {timedelta(seconds=1)}, f"slots missed: {taken}"


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


def extra_every(seconds: int) -> dict[str, str]:
    """The environment of an app whose "extra" schedule runs every `seconds`."""
    return {"SCHEDULES_APP_EXTRA_EVERY": str(seconds)}


OUTDATED = "runs outdated code"


@pytest.mark.timeout(240)
def test_during_a_deploy_the_new_codes_spec_runs_and_the_old_code_says_it_is_outdated(
    queue: jobq.Queue, dsn: str
) -> None:
    with supervisor(dsn, *ARGS, env=extra_every(1)) as old:
        wait_for("the old code's slots", lambda: len(slots(queue, "extra")) >= 2, timeout=90)
        with supervisor(dsn, *ARGS, env=extra_every(2)) as new:
            old.wait_for_log(OUTDATED, timeout=90)
            switched = queue.backend.clock()
            wait_for(
                f"the new code's slots; logs:\n{old.log}\n{new.log}",
                lambda: len([at for at in slots(queue, "extra") if at > switched]) >= 4,
                timeout=90,
            )
            drain(new)
        drain(old)
    taken = slots(queue, "extra")
    assert len(set(taken)) == len(taken), "a slot was enqueued twice"
    assert gaps([at for at in taken if at > switched]) == {timedelta(seconds=2)}, taken
    assert old.log.count(OUTDATED) == 1, "said once, not at every look"


@pytest.mark.timeout(240)
def test_a_housekeeper_frozen_past_its_slots_takes_each_of_them_when_it_resumes(
    queue: jobq.Queue, dsn: str
) -> None:
    # catch_up=False: before, each slot found more than 10 s late was skipped as missed.
    with supervisor(dsn, *ARGS, env=extra_every(1)) as running:
        wait_for("a first slot", lambda: slots(queue, "extra"), timeout=90)
        (frozen,) = housekeepers(running)
        os.kill(frozen, signal.SIGSTOP)
        try:
            since = queue.backend.clock()
            later = since + timedelta(seconds=12)
            wait_for("12 s frozen", lambda: queue.backend.clock() > later, timeout=60)
        finally:
            os.kill(frozen, signal.SIGCONT)
        wait_for("the slots after the freeze", lambda: slots(queue, "extra")[-1] > later)
        drain(running)
    taken = slots(queue, "extra")
    assert gaps(taken) == {timedelta(seconds=1)}, f"slots missed: {taken}"
    assert "skipped_missed" not in running.log
