"""Durable sleep and snooze: a job ends its attempt on purpose, to run again later, without
holding a worker meanwhile and without using up a retry.

The attempt raises Suspend, which no `except Exception` in the job catches. Its frame
(consuming.Handling) keeps it as the attempt's end, and the queue settles the job pending
again at the time asked, its max_attempts raised by one first (so the suspension is not
counted: the attempt numbers still count every run, and a sleep past the job's deadline
expires it, as a retry would). A sleep is a step: the time it wakes is recorded once, so
the run that resumes from it goes on past it, and never sleeps twice. The database's
schedule says when that run comes, not the worker's clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC, datetime

from .durable import opened

# How the message of every suspension starts (outcomes.UNRAISED names it).
SUSPENDED = "Suspended"
# A sleep's step is named for its place among the sleeps of one run, unless named.
SLEEP_STEP = "jobq.sleep-{}"


class Suspend(BaseException):
    """Ends the attempt to run the job again `delay` seconds from now; `message` says why,
    in the job's history and last error. Not an Exception: a job's own handlers let it by."""

    def __init__(self, delay: float, message: str, event: bool = False) -> None:
        super().__init__(message)
        self.delay = delay
        self.message = message
        self.event = event  # waiting for an event: woken at once if it came meanwhile


def seconds_of(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{what} takes a finite number of seconds, got {value!r}")
    if value < 0:
        raise ValueError(f"{what} takes seconds from 0 up, got {value!r}")
    return float(value)


def snooze(seconds: float) -> None:
    """From inside a job's handle(): end this attempt now and run the job again in
    `seconds`, from the top, without counting the attempt against its retry policy. Not a
    step: each run that gets here snoozes again. Returns only by raising."""
    opened("jobq.snooze()")
    delay = seconds_of(seconds, "jobq.snooze()")
    raise Suspend(delay, f"{SUSPENDED}: snoozed for {delay:g} s")


def sleep(seconds: float, name: str | None = None) -> None:
    """From inside a job's handle(): sleep `seconds` without holding a worker. The first run
    to get here records when to wake (a step, named `name` or for its place among this
    run's sleeps) and ends its attempt; the job runs again from the top then, replays its
    steps, and goes on past this call. Not counted against the retry policy."""
    delay = seconds_of(seconds, "jobq.sleep()")
    wake_at(lambda: time.time() + delay, name)


def sleep_until(when: datetime, name: str | None = None) -> None:
    """jobq.sleep() until `when` (an aware datetime); a time past returns at once."""
    if not isinstance(when, datetime) or when.tzinfo is None:
        raise ValueError(f"jobq.sleep_until() takes an aware datetime, got {when!r}")
    wake_at(when.timestamp, name)


def wake_at(waking: Callable[[], float], name: str | None) -> None:
    """Record when to wake, and suspend until then; once recorded, go past. The database
    decides when the job runs again: its time came, or it was made due sooner (an operator,
    a test's drain with_scheduled), and either way the sleep is over."""
    current = opened("jobq.sleep()")
    current.sleeps += 1
    label = name if name is not None else SLEEP_STEP.format(current.sleeps)
    done, _ = current.replayed(label)
    if done:
        return
    wake = current.record(label, waking())
    left = wake - time.time()
    if left > 0:
        until = datetime.fromtimestamp(wake, UTC).isoformat(timespec="seconds")
        raise Suspend(left, f"{SUSPENDED}: sleeping until {until} (step {label!r})")
