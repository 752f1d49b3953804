"""The lease arithmetic of fencing, in one place and without I/O.

The invariant: every deadline the master, the fence keeper or a worker acts on is at or
before the database's lease_until minus the safety margin.

Why it holds, term by term:
- Anchors. A lease's local end (`expires`, CLOCK_MONOTONIC) is taken as the moment the
  statement that granted or extended it was *sent*, plus the lease. The database set its
  lease_until no earlier than it received that statement, so `expires` is never later than
  lease_until (the clocks tick at the same rate; the database is not ahead in time on
  loopback, and a network delay only makes the local view earlier).
- A renewal only ever moves `expires` later, by a round anchored at its own send.
- The kill point is `expires - safety_margin - FENCE_LEAD`: the SIGKILL goes out a lead
  early so that the processes are gone, not just signalled, by `expires - safety_margin`.
  The stop point (SIGTERM) comes a kill grace before it. The fence keeper's deadline is the
  kill point too, written as an absolute time, never an interval from an earlier reading.
- A queued attempt (claimed with others by --prefetch, not started yet) starts only while
  more than half of what its lease vouches for is left, as its worker knows it: the claim's
  own `expires`, never the master's later extensions, which the worker does not see, and
  only up to the kill point. So its kill point is still well ahead when it starts, even
  before the master has written its extension to the fence table, and even while renewal
  rounds fail; otherwise the worker releases it and every one queued behind it
  (startable()).
- The startup timing rule makes the lease long enough for the master to see a renewal fail
  and still fence in time: the next round, a timed-out try and its retry after a pause,
  the kill grace, the fence lead and the safety margin all fit within one lease.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

# A kill is not instant: the process is scheduled, torn down and reaped. Fences act this much
# before the moment a worker must be gone, so that it is gone by then, not just signalled.
FENCE_LEAD = 0.1
# The pause before a failed or timed-out renewal round is tried once more.
RENEW_RETRY_PAUSE = 1.0


@dataclass
class Round:
    """A renewal round in flight: sent at `sent`, for these (job id -> (pid, token))."""

    id: int
    sent: float
    claims: dict[int, tuple[int, str]]


def exact(seconds: float) -> Decimal:
    return Decimal(repr(seconds))


def anchored(sent: float, lease: float) -> float:
    """When a lease granted by a statement sent at `sent` certainly lasts until."""
    return sent + lease


def extended(expires: float, round_sent: float, lease: float) -> float:
    """A lease's end after a renewal round sent at `round_sent` extended it: never earlier
    than it was."""
    return max(expires, anchored(round_sent, lease))


def kill_point(expires: float, safety_margin: float) -> float:
    """When SIGKILL goes out at the latest (by the master or the fence keeper), so the
    attempt is gone by expires - safety_margin."""
    return expires - safety_margin - FENCE_LEAD


def stop_point(expires: float, safety_margin: float, kill_grace: float) -> float:
    """The last moment to send SIGTERM and still leave the kill grace before the kill point."""
    return kill_point(expires, safety_margin) - kill_grace


def kill_at(now: float, kill_grace: float, expires: float | None, safety_margin: float) -> float:
    """When a SIGTERM sent at `now` is followed by SIGKILL: after the kill grace, but never
    past the kill point of the lease the worker holds, if any."""
    at = now + kill_grace
    return at if expires is None else min(at, kill_point(expires, safety_margin))


def startable(expires: float, now: float, lease: float, safety_margin: float) -> bool:
    """Whether a queued attempt whose lease, as its worker knows it, ends at `expires` may
    start at `now`: more than half of the time a lease vouches for (up to its kill point) is
    left before its kill point."""
    vouched = kill_point(lease, safety_margin)  # a lease's kill point, counted from its start
    return kill_point(expires, safety_margin) - now > vouched / 2


def timing_budget(
    renew_interval: float, renew_timeout: float, kill_grace: float, safety_margin: float
) -> Decimal:
    """How long a lease must outlast its last confirmed renewal, at worst: the next round,
    a timed-out try and its retry after a pause, the kill grace, the fence lead and the
    safety margin.

    In decimal, as the options were written: a binary float sum of 1 + 2 + 1 + 0.1 + 1.1
    falls just short of 5.2 and would let a lease of exactly the budget through."""
    return (
        exact(renew_interval)
        + 2 * exact(renew_timeout)
        + exact(RENEW_RETRY_PAUSE)
        + exact(kill_grace)
        + exact(FENCE_LEAD)
        + exact(safety_margin)
    )


def next_round(
    now: float, cycle_start: float, renew_interval: float, succeeded: bool, retrying: bool
) -> tuple[float, bool]:
    """(when the next renewal round goes out, whether it is a retry) after a round ended.

    A success starts the next cycle one interval after this cycle's first round. A first
    failure is retried once after a short pause; a failed retry waits for the next cycle.
    """
    if succeeded:
        return cycle_start + renew_interval, False
    if not retrying:
        return now + RENEW_RETRY_PAUSE, True
    return max(now, cycle_start + renew_interval), False
