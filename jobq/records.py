"""Plain records that cross the boundary between the queue and its callers."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from .attempt_log import AttemptEntry, Progress
from .retry import RetryPolicy


class Status(StrEnum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    # Enqueued after other jobs (enqueue's after=), some of which have yet to complete.
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


class Outcome(StrEnum):
    """How one attempt ended, as the worker that ran it saw it."""

    COMPLETED = "completed"
    RETRIED = "retried"  # failed; the job waits for another attempt
    FAILED = "failed"  # failed with no attempts left: the job failed
    EXPIRED = "expired"  # failed, and no retry could start before the job's deadline
    LOST = "lost"  # the acknowledgement was refused: the attempt no longer owned the job
    CANCELLED = "cancelled"  # an operator cancelled the job while this attempt ran
    # The job suspended itself (jobq.sleep, snooze, wait_for, gather): it runs again later,
    # and the attempt is not counted against its retry policy.
    SUSPENDED = "suspended"


@dataclass(frozen=True)
class ClaimedJob:
    """One attempt at a job. The token is the attempt's proof of ownership.

    lease_until is the database's own clock. expires_monotonic is this process's
    time.monotonic() reading by which the lease has certainly ended: it is anchored at the
    moment the claim (or renewal) was sent, so a slow reply can only make it earlier.
    """

    id: int
    type: str
    class_name: str
    payload: str
    attempt: int
    token: str
    lease_until: datetime
    retry: RetryPolicy
    deadline: datetime | None
    expires_monotonic: float
    # The W3C trace context stored with the job by the enqueue that traced it (see tracing.py).
    traceparent: str | None = None
    tracestate: str | None = None
    # What the job's last checkpoint() saved, for this attempt to resume from (JSON).
    checkpoint: Any = None
    # A completed attempt's result, encoded, on its way to the acknowledgement.
    result: str | None = None
    # When the attempt's code began and ended, by time.monotonic(), once it ran: a batch's
    # acknowledgement records each attempt's own start and end from them (acknowledged()).
    began: float | None = None
    ended: float | None = None
    # Reads the ids of the jobs this one was enqueued after; set while the attempt runs.
    parents_of: Callable[[int], tuple[int, ...]] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def parents(self) -> tuple[int, ...]:
        """The ids of the jobs this one was enqueued after (enqueue's after=), for the running
        attempt to read their results with Queue.get; one query, made when asked."""
        if self.parents_of is None:
            raise RuntimeError("parents is read from jobq.current_claim(), while the job runs")
        return self.parents_of(self.id)

    def renewed(self, lease_until: datetime, expires_monotonic: float) -> ClaimedJob:
        return dataclasses.replace(
            self, lease_until=lease_until, expires_monotonic=expires_monotonic
        )

    def completed(self, result: str | None) -> ClaimedJob:
        return self if result is None else self._changed(result=result)

    def timed(self, began: float, ended: float) -> ClaimedJob:
        """This attempt, begun and ended at these time.monotonic() readings."""
        return self._changed(began=began, ended=ended)

    def _changed(self, **fields: Any) -> ClaimedJob:
        """A copy with these fields changed. Not dataclasses.replace(), which runs __init__:
        on a no-op job's hot path it cost 6 us a call against under 1 (measured on 2 loaded
        cores), and a batched attempt makes up to two."""
        copy = object.__new__(ClaimedJob)
        copy.__dict__.update(self.__dict__, **fields)
        return copy

    def acknowledged(self, now: float) -> tuple[int, str, str | None, float, float]:
        """What a batched acknowledgement sends of this attempt: its id, token and result,
        and how many seconds before `now` (time.monotonic()) it began and ended. Ages, not
        times: the database subtracts them from its own clock, so the worker's clock and
        the database's need not agree, and the start of an attempt that waited in its
        worker's queue is its own, not its claim's (nor its end the acknowledgement's)."""
        began = now if self.began is None else self.began
        ended = now if self.ended is None else self.ended
        return self.id, self.token, self.result, now - began, now - ended


class Claims(list[ClaimedJob]):
    """A batched claim's attempts, in the order picked, and `refused`: how many of the rows it
    picked a limit refused (blocked, or left to the claim holding their key). A claim cut
    short by refusals met a backlog as deep as a full one: the adaptive prefetch counts the
    refused rows with the claimed ones, or it would fall back to one job a claim exactly
    where jobs of full keys crowd the head of the queue."""

    refused: int

    def __init__(self, claims: Iterable[ClaimedJob] = (), refused: int = 0) -> None:
        super().__init__(claims)
        self.refused = refused

    @property
    def picked(self) -> int:
        """The rows the claim took or was refused."""
        return len(self) + self.refused


@dataclass(frozen=True)
class JobRecord:
    """A job's row as stored, for inspection."""

    id: int
    type: str
    class_name: str
    payload: str
    status: Status
    attempts: int
    retry: RetryPolicy
    last_error: str | None
    scheduled_at: datetime
    deadline: datetime | None
    lease_until: datetime | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    priority: int = 0  # higher runs first
    host: str | None = None  # where the job runs, while it is in progress
    pid: int | None = None
    cancel_requested_at: datetime | None = None  # when an operator cancelled it as it ran
    unique_key: str | None = None  # held while the job is pending or in progress
    # The worker incarnation that claimed it (random, one per worker process), while it is in
    # progress: its supervisor settles the job by this id if that worker dies.
    worker: str | None = None
    # What handle() returned, decoded by the queue's codec (None: nothing, or not completed).
    result: Any = None
    # The class of the exception the latest failed attempt raised ("builtins.ValueError"),
    # whose traceback is then last_error; None when it raised none (its lease ran out).
    error_class: str | None = None
    progress: Progress | None = None  # as the running or last attempt said (jobq.progress)
    checkpoint: Any = None  # what jobq.checkpoint() saved last; cleared on completion
    # The ended attempts, oldest first (the first results.HISTORY_LIMIT of them).
    history: tuple[AttemptEntry, ...] = ()
    started_at: datetime | None = None  # when the first attempt began
    # When the latest attempt began; None while it is claimed but has not started (its
    # worker runs the attempts it claimed before it first), as after a release.
    attempted_at: datetime | None = None

    @property
    def claimed_unstarted(self) -> bool:
        """Whether the job is claimed but does not run yet: it waits in its worker's queue
        behind the attempts that worker claimed with it (see worker/prefetch.py)."""
        return self.status is Status.IN_PROGRESS and self.attempted_at is None

    @property
    def error_traceback(self) -> str | None:
        return None if self.error_class is None else self.last_error


@dataclass(frozen=True)
class Horizon:
    """What holds back the database's cleanup of the rows that jobs left dead, and so the
    cost of every claim that must step over them (docs/production.md): the oldest holder
    and how far behind it keeps cleanup.

    `age`: how long the holder has held it, in seconds (None: the database cannot tell, as
    for a PostgreSQL replication slot or any SQLite reader). `backlog`: what waits for the
    cleanup meanwhile, in the database's own unit: transactions since the horizon on
    PostgreSQL, undo log records (the history list length) on MariaDB, WAL frames not yet
    checkpointed on SQLite. `holder`: who, as the database names it (a pid or thread id, its
    application and state, a replication slot), without its query or credentials."""

    age: float | None
    backlog: int | None
    holder: str | None


@dataclass(frozen=True)
class JobFilter:
    """What an operator looks for among the jobs (the status page's Jobs list, its bulk
    actions): every field given must hold. Times bound a range, `after` inclusive and
    `before` exclusive. `path` holds the keys into a JSON payload (("customer", "id")), where
    the value as text must equal `equals`; `error` is text the last error contains, in
    any case."""

    status: Status | None = None
    type: str | None = None
    priority: int | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    scheduled_after: datetime | None = None
    scheduled_before: datetime | None = None
    finished_after: datetime | None = None
    finished_before: datetime | None = None
    unique_key: str | None = None
    concurrency_key: str | None = None
    host: str | None = None
    path: tuple[str, ...] = ()
    equals: str | None = None
    error: str | None = None

    @property
    def narrow(self) -> bool:
        """Whether it asks more than a status and a type, which an index answers alone."""
        return any(
            getattr(self, name) not in (None, ())
            for name in self.__dataclass_fields__
            if name not in ("status", "type")
        )
