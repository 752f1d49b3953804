"""Enqueueing the due slots of the declared schedules, exactly once each, on any number of
processes (every supervisor's housekeeper and every `jobq work`).

Each schedule has a guard row holding the last slot taken and the spec it was taken under.
A process that finds a later slot due moves the guard to it with a compare-and-set, and in
the same transaction enqueues the slot's job: of all the processes that saw the slot, one
moves the guard and enqueues, and the others' compare-and-set finds the row moved and does
nothing. The guard is the only record, so restarts and pruned jobs change nothing.

Time is the database's: every process compares slots to one clock.

- Slots are taken in order while they are on time (up to 10 s late), so a process that is
  a little late takes every slot. Of slots missed (later than that: downtime), only the
  latest runs, not a burst; with catch_up=False, none does.
- With overlap=False, a slot whose previous job is still pending or in progress is taken
  but skipped, and counted.
- A schedule seen for the first time, or whose spec changed, starts from its next slot.
- A schedule removed from the code is simply never looked at again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from functools import partial

from ..backends.base import Backend, NewJob
from ..backends.uniqueness import Guard
from . import ON_TIME, Periodic

log = logging.getLogger("jobq")

# However far away the next slot, look again after this long: a schedule's cron may have
# been changed by another process's deploy, and the database's clock may have been set.
LONGEST_WAIT = 60.0
# A process woken a little before a slot (its clock runs a little fast) looks again soon.
SHORTEST_WAIT = 0.05


class Slot(StrEnum):
    """What became of a due slot: jobq_schedule_slots_total's outcomes."""

    ENQUEUED = "enqueued"
    OVERLAP = "skipped_overlap"  # overlap=False, and the previous job is still active
    MISSED = "skipped_missed"  # catch_up=False, and the slot was found too late


@dataclass
class Tick:
    """One look at the schedules: what was taken, and how long until the next slot."""

    now: datetime
    taken: list[tuple[str, Slot, int | None]] = field(default_factory=list)
    next_slot: datetime | None = None

    def wait(self) -> float:
        """Seconds until the next slot of any schedule is due, within bounds."""
        if self.next_slot is None:
            return LONGEST_WAIT
        seconds = (self.next_slot - self.now).total_seconds()
        return min(LONGEST_WAIT, max(SHORTEST_WAIT, seconds))


@dataclass(frozen=True)
class State:
    """A schedule as `jobq schedules` shows it."""

    name: str
    spec: str
    last_slot: datetime | None
    next_slot: datetime
    last_job_id: int | None


MakeRow = Callable[[Periodic, datetime], NewJob]


def run_due(
    backend: Backend,
    make_row: MakeRow,
    schedules: Iterable[Periodic],
    now: datetime | None = None,
) -> Tick:
    """Take every slot due at `now` (the database's clock unless given)."""
    tick = Tick(now or backend.clock())
    guards = backend.guards()
    for periodic in schedules:
        due = periodic.latest(tick.now)
        guard = guards.get(periodic.name)
        if guard is None:
            backend.create_guard(periodic.name, periodic.spec, due)
        elif guard.spec != periodic.spec:
            if backend.advance_guard(guard, periodic.spec, due):
                log.info(
                    "Schedule %s changed to %s: it runs from its next slot",
                    periodic.name,
                    periodic.spec,
                    extra={"event": "schedule_changed", "schedule": periodic.name},
                )
        elif due > guard.slot:
            take_due(backend, make_row, periodic, guard, due, tick)
        following = periodic.following(tick.now)
        if tick.next_slot is None or following < tick.next_slot:
            tick.next_slot = following
    return tick


def take_due(
    backend: Backend, make_row: MakeRow, periodic: Periodic, guard: Guard, due: datetime, tick: Tick
) -> None:
    """Take the slots after the guard's, up to `due`: each one while they are on time, and of
    missed ones only the latest."""
    while guard.slot < due:
        slot = periodic.following(guard.slot)
        if tick.now - slot > ON_TIME:
            slot = due
        taken = backend.retrying(
            "schedule", partial(take, backend, make_row, periodic, guard, slot, tick.now)
        )
        if taken is None:
            return  # another process is taking this schedule's slots
        tick.taken.append((periodic.name, *taken))
        guard = Guard(guard.name, periodic.spec, slot, taken[1] or guard.job_id)


def take(
    backend: Backend,
    make_row: MakeRow,
    periodic: Periodic,
    guard: Guard,
    due: datetime,
    now: datetime,
) -> tuple[Slot, int | None] | None:
    """Move the guard to `due` and enqueue its job, in one transaction; None when another
    process took the slot first."""
    with backend.transaction():
        if not backend.advance_guard(guard, periodic.spec, due):
            return None
        outcome = Slot.ENQUEUED
        if not periodic.catch_up and now - due > ON_TIME:
            outcome = Slot.MISSED
        elif not periodic.overlap and guard.job_id and backend.is_active(guard.job_id):
            outcome = Slot.OVERLAP
        job_id = None
        if outcome is Slot.ENQUEUED:
            job_id = backend.add(make_row(periodic, due), backend.connection)
            backend.guard_job(periodic.name, job_id)
    extra = {"event": f"schedule_{outcome}", "schedule": periodic.name, "job_id": job_id}
    if outcome is Slot.ENQUEUED:
        log.info("Schedule %s: slot %s enqueued", periodic.name, due.isoformat(), extra=extra)
    else:
        log.warning("Schedule %s: slot %s %s", periodic.name, due.isoformat(), outcome, extra=extra)
    return outcome, job_id


def states(backend: Backend, schedules: Iterable[Periodic]) -> list[State]:
    now = backend.clock()
    guards = backend.guards()
    found = []
    for periodic in schedules:
        guard = guards.get(periodic.name)
        current = guard is not None and guard.spec == periodic.spec
        found.append(
            State(
                name=periodic.name,
                spec=periodic.spec,
                last_slot=guard.slot if guard is not None and current else None,
                next_slot=periodic.following(now),
                last_job_id=guard.job_id if guard is not None else None,
            )
        )
    return found
