"""Concurrency and rate limits as a job class declares them, and the key each job is
counted under.

A slot is not a counter: the database counts the attempts of a key that are in progress with
a live lease, under a lock on the key, as each claim starts one (see docs/guides/limits.md).
So nothing has to give a slot back, and no ending of an attempt can leak one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# The name a concurrency limit goes by in the limits table, the blocked_on column, the CLI,
# the status page and the metrics' `limit` label.
CONCURRENCY = "concurrency"
# A rate limit's, in the limits table, the CLI, the status page and the metrics.
RATE = "rate"

# The longest window of a rate limit: a week, far beyond any vendor's quota period.
MAX_PER = 7 * 86_400.0

# A key fits the key column and its indexes on every database (VARCHAR(191) on MySQL, whose
# index entries of utf8mb4 text must stay under 3,072 bytes with the type beside them).
MAX_KEY = 191

# The largest limit: far above any worker count, and small enough for every integer column.
MAX_COUNT = 1_000_000

# The key of a limit on a job type as a whole (key=None).
WHOLE_TYPE = ""


def check_count(count: object, what: str = "count") -> int:
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        raise ValueError(
            f"a limit's {what} must be a whole number from 1 to 1000000, got {count!r}"
        )
    return count


def count_from_text(text: str, what: str) -> int:
    """A count an operator typed (the command line, the status page), checked."""
    return check_count(int(text) if text.strip().isdecimal() else text, what)


@dataclass(frozen=True)
class Concurrency:
    """At most `count` attempts of one key in progress at once, across every worker.

    `key` computes a job's key from the job at enqueue (stored with the job, as text); None
    limits the job type as a whole.
    """

    count: int
    key: Callable[[Any], object] | None = None

    def __post_init__(self) -> None:
        check_count(self.count)
        if self.key is not None and not callable(self.key):
            raise TypeError(
                f"Concurrency's key must be a function of the job or None, got {self.key!r}"
            )

    def key_of(self, job: object) -> str:
        """The key `job` is counted under, checked to fit every database."""
        return key_text(self.key, job, "concurrency")


@dataclass(frozen=True)
class Rate:
    """At most `count` attempts of one key started in any `per` seconds, across every worker
    (a sliding window: no span of `per` seconds ever holds more than `count` starts).

    `key` computes a job's key from the job at enqueue, as Concurrency's does.
    """

    count: int
    per: float
    key: Callable[[Any], object] | None = None

    def __post_init__(self) -> None:
        check_count(self.count)
        check_per(self.per)
        if self.key is not None and not callable(self.key):
            raise TypeError(f"Rate's key must be a function of the job or None, got {self.key!r}")

    def key_of(self, job: object) -> str:
        return key_text(self.key, job, "rate")


def check_per(per: object) -> float:
    if isinstance(per, bool) or not isinstance(per, int | float) or not 0 < per <= MAX_PER:
        raise ValueError(
            f"a rate limit's window (per) must be a number of seconds above 0 and at most "
            f"{MAX_PER:.0f}, got {per!r}"
        )
    return float(per)


def rate_from_text(text: str) -> tuple[int, float]:
    """A rate an operator typed, N/SECONDS (the command line, the status page), checked."""
    count, slash, per = text.partition("/")
    if not slash:
        raise ValueError(f"a rate is N/SECONDS, e.g. 10/60 for 10 starts a minute, got {text!r}")
    try:
        seconds = float(per)
    except ValueError:
        raise ValueError(f"a rate's SECONDS must be a number, got {per!r}") from None
    return count_from_text(count, "rate count"), check_per(seconds)


def key_text(key: Callable[[Any], object] | None, job: object, what: str) -> str:
    if key is None:
        return WHOLE_TYPE
    text = str(key(job))
    if len(text) > MAX_KEY or "\x00" in text or any("\ud800" <= c <= "\udfff" for c in text):
        raise ValueError(
            f"{type(job).__name__}: a {what} key must be text of at most {MAX_KEY} "
            f"characters without NUL bytes or lone surrogates, got {text[:40]!r}"
        )
    return text


def concurrency_of(job: object) -> Concurrency | None:
    """The job class's declared limit, checked (a class attribute of the wrong kind fails
    its enqueue, naming the fix)."""
    declared = getattr(type(job), "concurrency", None)
    if declared is None or isinstance(declared, Concurrency):
        return declared
    raise TypeError(
        f"{type(job).__name__}.concurrency must be a jobq.Concurrency(count, key=...), "
        f"got {declared!r}"
    )


def rate_of(job: object) -> Rate | None:
    """The job class's declared rate limit, checked as concurrency_of checks its limit."""
    declared = getattr(type(job), "rate", None)
    if declared is None or isinstance(declared, Rate):
        return declared
    raise TypeError(
        f"{type(job).__name__}.rate must be a jobq.Rate(count, per=..., key=...), got {declared!r}"
    )
