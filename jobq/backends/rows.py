"""The values the queue core and the backends hand each other: a row to insert, where an
attempt runs, a renewal round's answer and an expired lease.

They sit below base.py and its mixins, which all use them, so that none of those modules
has to import another one back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, NamedTuple

from ..records import ClaimedJob, Status
from ..retry import RetryPolicy

# The insert parameters every backend's insert statement takes, in insert_values' order.
INSERT_NAMES = (
    "type",
    "class_name",
    "payload",
    "max_attempts",
    "backoff",
    "max_backoff",
    "jitter",
    "scheduled_at",
    "delay",
    "deadline",
    "deadline_in",
    "priority",
    "unique_key",
    "traceparent",
    "tracestate",
    "limit_key",
    "rate_key",
    "blocked_on",
)


class NewJob(NamedTuple):
    """A row to insert. Times are either absolute or seconds from the database's now.

    A named tuple: enqueue_many makes one per job, and a frozen dataclass took longer to make
    than the job's JSON."""

    type: str
    class_name: str
    payload: str
    retry: RetryPolicy
    scheduled_at: datetime | None
    delay: float
    deadline: datetime | None
    deadline_in: float | None
    priority: int
    # At most one pending or in_progress job holds a key (see Backend.add).
    unique_key: str | None = None
    # The W3C trace context of the enqueue that traced it (see tracing.py), else None.
    traceparent: str | None = None
    tracestate: str | None = None
    # The key a concurrency limit counts the job under (None: the type has no limit).
    limit_key: str | None = None
    # The key a rate limit counts the job's starts under (None: the type has none).
    rate_key: str | None = None
    # The limit the job is written blocked on, behind its key's first jobs of the same
    # enqueue_many (see queue/limits.queued_behind); None: written ready.
    blocked_on: str | None = None


class Runner(NamedTuple):
    """Where an attempt runs, as its claim records it: the queue core says, since a backend
    knows nothing of processes."""

    host: str
    pid: int
    # The worker incarnation that claims (see running.worker_id): what its supervisor
    # settles by when it dies, whether or not it heard of the claim.
    worker: str
    # Whether the attempts of a batch it claims wait in its queue, each started once the one
    # before it ended (a process worker's prefetch), rather than all starting at once: then
    # the claim records the start of the first only (see JobRecord.claimed_unstarted).
    queued: bool = False

    def params(self) -> dict[str, Any]:
        """The statement parameters host, pid, worker and queued: as _asdict(), at a third
        of its cost (a fused claim's statement builds them for every job)."""
        return {"host": self.host, "pid": self.pid, "worker": self.worker, "queued": self.queued}


class Refused(Enum):
    """A claim's answer when a limit refused every row it probed (each now blocked, or left
    for the claim that holds its key): ready jobs may wait behind them, so the caller claims
    again at once, where None (nothing ready) sends it to wait for work."""

    REFUSED = "refused"


REFUSED = Refused.REFUSED


def claimed_only(claim: ClaimedJob | Refused | None) -> ClaimedJob | None:
    """A claim fused with an acknowledgement takes no second try: the worker's next claim
    goes on past the refused rows without waiting."""
    return claim if isinstance(claim, ClaimedJob) else None


# A completed attempt a batched acknowledgement records: its id, token and encoded result,
# and how many seconds ago it began and ended (ClaimedJob.acknowledged).
Acknowledgement = tuple[int, str, str | None, float, float]

# How far a batched acknowledgement's recorded start or end may be from the attempt's own
# (seconds): a batch whose attempts all began within it of their acknowledgement may be
# stamped with the acknowledgement's moment. On PostgreSQL, reading each attempt's times from
# the statement's JSON parameter costs five lookups a row, about a tenth of a no-op job's
# server time; the attempts of so short a batch have no times worth telling apart.
ACK_PRECISION = 0.05


class Renewal(NamedTuple):
    """A renewal round's answer: the leases it extended, and of those the attempts an
    operator asked to cancel."""

    extended: set[int]
    cancelled: set[int]


@dataclass(frozen=True)
class ExpiredLease:
    """An in_progress row whose lease has ended, as maintenance sees it."""

    id: int
    token: str
    attempts: int
    retry: RetryPolicy
    type: str
    cancelled: bool  # an operator asked to cancel it: it ends cancelled, not retried


class ParentsLeft(NamedTuple):
    """What a job of a workflow still waits for: the parents it was enqueued after that have
    not completed (for a batch's `then` job, the members that have not ended), and of those
    the ones that ended badly, which no longer can, with how they ended."""

    unfinished: tuple[int, ...]
    ended_badly: tuple[tuple[int, Status], ...]
