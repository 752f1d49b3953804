"""Retry policy: how many attempts a job gets and how long it waits between them."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import lru_cache

# No wait, lease or delay may exceed ten years: beyond that, date arithmetic in some
# databases overflows, and no job means it.
MAX_DELAY = 10 * 365 * 86400.0

# Attempt counters are 32-bit integer columns in PostgreSQL and MySQL.
MAX_ATTEMPTS = 2**31 - 1


@dataclass(frozen=True)
class RetryPolicy:
    """Attempt n+1 waits min(max_backoff, backoff * 2**(n-1)) seconds after attempt n failed.

    With jitter the wait is drawn uniformly from the upper half of that figure, which spreads a
    burst of failures out without ever waiting longer than the policy says.
    """

    max_attempts: int = 3
    backoff: float = 10.0
    max_backoff: float = 3600.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise TypeError(f"max_attempts must be an int, got {self.max_attempts!r}")
        if not 1 <= self.max_attempts <= MAX_ATTEMPTS:
            raise ValueError(
                f"max_attempts must be from 1 to {MAX_ATTEMPTS}, got {self.max_attempts}"
            )
        for name in ("backoff", "max_backoff"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not 0 <= value <= MAX_DELAY
            ):
                raise ValueError(
                    f"{name} must be a number of seconds from 0 to {MAX_DELAY:.0f}, got {value!r}"
                )
        # Stored as a boolean column: anything else (a truthy "no", None) would change meaning.
        if not isinstance(self.jitter, bool):
            raise TypeError(f"jitter must be True or False, got {self.jitter!r}")

    def allows_another(self, attempts_made: int) -> bool:
        return attempts_made < self.max_attempts

    def delay_after(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before the attempt that follows attempt number `attempt` (from 1)."""
        if attempt < 1:
            raise ValueError(f"attempt numbers start at 1, got {attempt}")
        # ldexp scales by a power of two exactly. Past an exponent of 2200 even the smallest
        # positive float overflows, so the cap changes nothing but the size of the number.
        try:
            raw = math.ldexp(float(self.backoff), min(attempt - 1, 2200))
        except OverflowError:
            raw = math.inf
        delay = min(float(self.max_backoff), raw)
        if self.jitter and delay > 0:
            delay *= 0.5 + 0.5 * (rng or random).random()
        return delay


@lru_cache(maxsize=1024)
def stored_policy(
    max_attempts: int, backoff: float, max_backoff: float, jitter: bool
) -> RetryPolicy:
    """The policy a stored job carries. Jobs share a handful of policies, and every claim
    reads one: each is built and checked once, then shared (a policy is immutable)."""
    return RetryPolicy(max_attempts, backoff, max_backoff, jitter)
