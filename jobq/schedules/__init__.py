"""Periodic jobs, declared in the application's module and checked when it is imported.

    import jobq

    jobq.schedule("nightly-report", BuildReport("all"), cron="0 3 * * *",
                  timezone="Europe/Berlin")
    jobq.schedule("heartbeat", Ping(), every=30)

This module is the declarations and their arithmetic: which slot is the latest one due at a
moment, and which comes next. Enqueueing the due slots exactly once is scheduler.py's.

Cron expressions are read by cronsim, which follows Debian's cron across DST changes: a time
that falls in the hour skipped in spring runs when that hour ends, a fixed time in the hour
repeated in autumn runs once, and a wildcard hour runs in both passes of it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from ..errors import ConfigurationError
from ..job import Job, check_runnable_elsewhere
from ..retry import MAX_DELAY, RetryPolicy

# The schedules table's primary key is VARCHAR(200) on MySQL.
MAX_NAME = 200

# A slot taken up to this long after its moment is on time; a later one was missed. Processes
# look at the schedules when each slot comes, so only downtime (or a stalled database, or a
# machine so loaded that every process is late) makes a slot this late.
ON_TIME = timedelta(seconds=10)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Periodic:
    """One declared schedule, checked."""

    name: str
    job: Job
    cron: str | None
    timezone: ZoneInfo
    every_us: int | None  # the interval, in whole microseconds
    type: str | None
    retry: RetryPolicy | None
    priority: int
    overlap: bool
    catch_up: bool
    # When this process declared it (imported the application): of two processes declaring
    # one name with different specs, the later declaration wins (see scheduler.py).
    declared_at: datetime = field(default_factory=lambda: datetime.now(UTC), compare=False)

    @property
    def spec(self) -> str:
        """What the slots are made from. Stored beside the guard row: a schedule whose spec
        changed starts from the next slot of its new spec, not from a slot of the old one."""
        if self.cron is not None:
            return f"cron {self.cron} {self.timezone.key}"
        assert self.every_us is not None
        # Exact, so that any change of interval is a change of spec.
        whole, fraction = divmod(self.every_us, 1_000_000)
        return f"every {whole}s" if not fraction else f"every {self.every_us / 1e6!r}s"

    def with_spec(self, spec: str) -> Periodic | None:
        """This schedule as another process declares it, from the spec that process stored
        (see `spec`); None for a spec this jobq cannot read."""
        slots = spec_slots(spec)
        if slots is None:
            return None
        zone = slots.timezone if slots.cron is not None else self.timezone
        return replace(self, cron=slots.cron, timezone=zone, every_us=slots.every_us)

    @property
    def slots(self) -> Slots:
        return Slots(self.cron, self.timezone, self.every_us)

    def latest(self, now: datetime) -> datetime:
        """The latest slot at or before `now` (an aware datetime), in UTC."""
        return self.slots.latest(now)

    def following(self, now: datetime) -> datetime:
        """The first slot after `now`, in UTC."""
        return self.slots.following(now)


@dataclass(frozen=True)
class Slots:
    """When a schedule's slots come: a cron line in a time zone, or an interval."""

    cron: str | None
    timezone: ZoneInfo
    every_us: int | None

    def latest(self, now: datetime) -> datetime:
        if self.every_us is not None:
            elapsed = (now - EPOCH) // timedelta(microseconds=1)
            return EPOCH + timedelta(microseconds=elapsed // self.every_us * self.every_us)
        assert self.cron is not None
        # cronsim steps in whole seconds and strictly backwards from its start.
        start = now.astimezone(UTC).replace(microsecond=0) + timedelta(seconds=1)
        return next(CronSim(self.cron, start.astimezone(self.timezone), reverse=True)).astimezone(
            UTC
        )

    def following(self, now: datetime) -> datetime:
        if self.every_us is not None:
            return self.latest(now) + timedelta(microseconds=self.every_us)
        assert self.cron is not None
        return next(CronSim(self.cron, now.astimezone(self.timezone))).astimezone(UTC)


def spec_slots(spec: str) -> Slots | None:
    """The slots of a stored spec (see Periodic.spec); None for one this jobq cannot read."""
    kind, _, rest = spec.partition(" ")
    try:
        if kind == "every":
            return Slots(None, ZoneInfo("UTC"), round(float(rest.removesuffix("s")) * 1_000_000))
        cron, _, name = rest.rpartition(" ")
        if kind == "cron" and cron:
            zone = ZoneInfo(name)
            CronSim(cron, datetime.now(zone))
            return Slots(cron, zone, None)
    except (ValueError, KeyError, CronSimError):  # a zone unknown here is a KeyError
        pass
    return None


class Schedules:
    """A registry of schedules by name; jobq.schedule() adds to REGISTERED."""

    def __init__(self) -> None:
        self.by_name: dict[str, Periodic] = {}

    def add(self, periodic: Periodic) -> Periodic:
        if periodic.name in self.by_name:
            raise ConfigurationError(
                f"jobq.schedule({periodic.name!r}): a schedule of that name is already declared"
            )
        self.by_name[periodic.name] = periodic
        return periodic

    def __iter__(self) -> Iterator[Periodic]:
        return iter(self.by_name.values())

    def __len__(self) -> int:
        return len(self.by_name)


REGISTERED = Schedules()


def schedule(
    name: str,
    job: Job,
    *,
    cron: str | None = None,
    timezone: str = "UTC",
    every: float | timedelta | None = None,
    type: str | None = None,
    retry: RetryPolicy | None = None,
    priority: int = 0,
    overlap: bool = False,
    catch_up: bool = True,
) -> Periodic:
    """Enqueue `job` at every slot of `cron` (in `timezone`) or `every` seconds, exactly once
    per slot however many supervisors and `jobq work` processes run.

    overlap=False skips a slot while the job of the previous one is pending or running.
    Slots missed (not taken within 10 s, after downtime) never come as a burst: only the
    latest one runs, or with catch_up=False none.
    """
    return REGISTERED.add(
        periodic(name, job, cron, timezone, every, type, retry, priority, overlap, catch_up)
    )


def periodic(
    name: str,
    job: Job,
    cron: str | None,
    timezone: str,
    every: float | timedelta | None,
    type: str | None,
    retry: RetryPolicy | None,
    priority: int,
    overlap: bool,
    catch_up: bool,
) -> Periodic:
    """A schedule's declaration, checked; raises ConfigurationError naming what is wrong."""
    where = f"jobq.schedule({name!r})"
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME or "\x00" in name:
        raise ConfigurationError(
            f"jobq.schedule: a name must be a non-empty string of up to {MAX_NAME} characters, "
            f"got {name!r}"
        )
    if not isinstance(job, Job):
        raise ConfigurationError(f"{where}: the job must be a jobq.Job instance, got {job!r}")
    try:
        check_runnable_elsewhere(job.__class__)
    except TypeError as error:
        raise ConfigurationError(f"{where}: {error}") from None
    if (cron is None) == (every is None):
        raise ConfigurationError(f"{where}: give either cron= or every=, not both or neither")
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise ConfigurationError(f"{where}: retry must be a jobq.RetryPolicy, got {retry!r}")
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ConfigurationError(f"{where}: priority must be an int, got {priority!r}")
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ConfigurationError(f"{where}: unknown time zone {timezone!r}") from None
    if cron is not None and not isinstance(cron, str):
        raise ConfigurationError(f"{where}: cron must be a string, got {cron!r}")
    every_us = None if every is None else interval(where, every)
    if cron is not None:
        try:
            CronSim(cron, datetime.now(zone))
        except CronSimError as error:
            raise ConfigurationError(f"{where}: invalid cron {cron!r}: {error}") from None
    return Periodic(
        name=name,
        job=job,
        cron=cron,
        timezone=zone,
        every_us=every_us,
        type=type,
        retry=retry,
        priority=priority,
        overlap=bool(overlap),
        catch_up=bool(catch_up),
    )


def interval(where: str, every: float | timedelta) -> int:
    """`every` in whole microseconds, checked."""
    try:
        seconds = every.total_seconds() if isinstance(every, timedelta) else float(every)
    except (TypeError, ValueError):
        raise ConfigurationError(
            f"{where}: every must be seconds or a timedelta, got {every!r}"
        ) from None
    micro = round(seconds * 1_000_000) if math.isfinite(seconds) else 0
    if micro <= 0 or seconds > MAX_DELAY:
        raise ConfigurationError(
            f"{where}: every must be more than 0 and at most {MAX_DELAY:.0f} seconds, got {every!r}"
        )
    return micro
