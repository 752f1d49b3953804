"""Enqueueing the due slots of the declared schedules, exactly once each, on any number of
processes (every supervisor's housekeeper and every `jobq work`).

Each schedule has a guard row holding the last slot taken and the spec it was taken under.
A process that finds a later slot due moves the guard to it with a compare-and-set, and in
the same transaction enqueues the slot's job: of all the processes that saw the slot, one
moves the guard and enqueues, and the others' compare-and-set finds the row moved and does
nothing. The guard is the only record, so restarts and pruned jobs change nothing.

Time is the database's: every process compares slots to one clock.

- Slots are taken in order while they are on time (up to 10 s late), and so is every slot
  that came after the process began watching (its first look, kept in a Watch), however
  late it gets to it: a busy process was there to take it. Of slots missed (more than 10 s
  late, and before any process watching looked: downtime), only the latest runs, not a
  burst; with catch_up=False, none does.
- With overlap=False, a slot whose previous job is still pending or in progress is taken
  but skipped, and counted.
- A schedule seen for the first time, or whose spec changed, starts from its next slot.
  Where processes declare one name with different specs (a deploy in progress), the guard
  row records when the process whose spec it holds declared it, and the newest declaration
  wins (see adopt()).
- A schedule removed from the code is simply never looked at again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from functools import partial

from ..backends.base import Backend
from ..backends.rows import NewJob
from ..backends.uniqueness import Guard
from . import ON_TIME, Periodic, spec_slots

log = logging.getLogger("jobq")

# However far away the next slot, look again after this long: a schedule's cron may have
# been changed by another process's deploy, and the database's clock may have been set.
LONGEST_WAIT = 60.0
# A process woken a little before a slot (its clock runs a little fast) looks again soon.
SHORTEST_WAIT = 0.05
# A process whose declaration of a schedule lost to a newer one takes it back once a slot of
# the newer spec has gone this long without a taker. Longer than a busy housekeeper is late
# (a long maintenance run), so that it does not take the schedule from one that is there.
UNSERVED = timedelta(minutes=5)


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
    next_slot: datetime | None  # None: a spec this jobq cannot read (a newer jobq's)
    last_job_id: int | None
    type: str | None = None  # the type its jobs take, where known
    # Declared in this process; False: known from the database alone (a supervisor's).
    declared_here: bool = True


MakeRow = Callable[[Periodic, datetime], NewJob]


@dataclass
class Watch:
    """What one process keeps between its looks at the schedules: since when it has watched
    them (the database's clock at its first look), and which schedules it has said it runs
    outdated code for, so that it says so once."""

    since: datetime | None = None
    outdated: set[str] = field(default_factory=set)


def run_due(
    backend: Backend,
    make_row: MakeRow,
    schedules: Iterable[Periodic],
    now: datetime | None = None,
    watch: Watch | None = None,
) -> Tick:
    """Take every slot due at `now` (the database's clock unless given). `watch` is what the
    calling process kept from its earlier looks; without it, this is its first."""
    tick = Tick(now or backend.clock())
    watch = watch or Watch()
    if watch.since is None:
        watch.since = tick.now
    guards = backend.guards()
    for periodic in schedules:
        guard = guards.get(periodic.name)
        if guard is None:
            due = periodic.latest(tick.now)
            backend.create_guard(periodic.name, periodic.spec, due, periodic.declared_at)
        elif guard.spec != periodic.spec:
            adopt(backend, periodic, guard, tick.now, watch)
        else:
            watch.outdated.discard(periodic.name)
            due = periodic.latest(tick.now)
            if due > guard.slot:
                take_due(backend, make_row, periodic, guard, due, tick, watch.since)
        following = periodic.following(tick.now)
        if tick.next_slot is None or following < tick.next_slot:
            tick.next_slot = following
    return tick


def adopt(backend: Backend, periodic: Periodic, guard: Guard, now: datetime, watch: Watch) -> None:
    """The guard row holds another spec of this schedule: another process declares it
    otherwise (a deploy in progress), or the code changed. The newer declaration wins, and
    the schedule runs from its next slot; an older one leaves the schedule alone and says
    once that it is outdated, unless the newer spec's slots go untaken (its processes are
    gone): then it takes the schedule back."""
    newer = guard.declared_at is None or periodic.declared_at > guard.declared_at
    if newer or unserved(periodic, guard, now):
        if backend.advance_guard(guard, periodic.spec, periodic.latest(now), periodic.declared_at):
            watch.outdated.discard(periodic.name)
            log.info(
                "Schedule %s changed to %s: it runs from its next slot",
                periodic.name,
                periodic.spec,
                extra={"event": "schedule_changed", "schedule": periodic.name},
            )
        return
    if periodic.name not in watch.outdated:
        watch.outdated.add(periodic.name)
        log.warning(
            "Schedule %s: this process declares it as %s, but one that declared it later (as "
            "%s) runs it: this process runs outdated code, and leaves the schedule to the newer",
            periodic.name,
            periodic.spec,
            guard.spec,
            extra={"event": "schedule_outdated", "schedule": periodic.name},
        )


def unserved(periodic: Periodic, guard: Guard, now: datetime) -> bool:
    """Whether the guard's own spec has a slot that nobody took for UNSERVED."""
    other = periodic.with_spec(guard.spec)
    return other is not None and now - other.following(guard.slot) > UNSERVED


def take_due(
    backend: Backend,
    make_row: MakeRow,
    periodic: Periodic,
    guard: Guard,
    due: datetime,
    tick: Tick,
    since: datetime,
) -> None:
    """Take the slots after the guard's, up to `due`: each one that is on time or came while
    this process watched (however late it gets to them: it was busy, not away); of the ones
    missed before it watched, only the latest."""
    while guard.slot < due:
        slot = periodic.following(guard.slot)
        missed = tick.now - slot > ON_TIME and slot < since
        if missed:
            slot = periodic.latest(since)
            missed = tick.now - slot > ON_TIME
        taken = backend.retrying(
            "schedule", partial(take, backend, make_row, periodic, guard, slot, missed)
        )
        if taken is None:
            return  # another process is taking this schedule's slots
        tick.taken.append((periodic.name, *taken))
        guard = guard._replace(slot=slot, job_id=taken[1] or guard.job_id)


def take(
    backend: Backend,
    make_row: MakeRow,
    periodic: Periodic,
    guard: Guard,
    due: datetime,
    missed: bool,
) -> tuple[Slot, int | None] | None:
    """Move the guard to `due` and enqueue its job, in one transaction; None when another
    process took the slot first. A `missed` slot (nobody watched when it came) is skipped
    without catch_up."""
    with backend.transaction():
        if not backend.advance_guard(guard, periodic.spec, due):
            return None
        outcome = Slot.ENQUEUED
        if missed and not periodic.catch_up:
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


def states(
    backend: Backend, schedules: Iterable[Periodic], stored: Mapping[str, str] | None = None
) -> list[State]:
    """Each schedule of `schedules`; with `stored` ({name: type} of schedules running
    supervisors declare), also each schedule whose guard row is in the database and that is
    not declared here: a process that did not import the application, or imported it before
    a schedule was added, still shows what the supervisors run."""
    now = backend.clock()
    guards = backend.guards()
    found = []
    for periodic in schedules:
        guard = guards.pop(periodic.name, None)
        current = guard is not None and guard.spec == periodic.spec
        found.append(
            State(
                name=periodic.name,
                spec=periodic.spec,
                last_slot=guard.slot if guard is not None and current else None,
                next_slot=periodic.following(now),
                last_job_id=guard.job_id if guard is not None else None,
                type=periodic.type or periodic.job.type,
            )
        )
    if stored is None:
        return found
    for guard in sorted(guards.values()):
        slots = spec_slots(guard.spec)
        following = None if slots is None else slots.following(now)
        kind = stored.get(guard.name)
        found.append(
            State(guard.name, guard.spec, guard.slot, following, guard.job_id, kind, False)
        )
    return found
