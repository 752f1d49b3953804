"""The Queue: producers enqueue jobs, consumers claim, run and acknowledge them."""

from __future__ import annotations

import logging
import math
import os
import secrets
import socket
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from . import backends, controls
from .backends.base import Backend, ExpiredLease, NewJob, Renewal, Runner, expiry
from .codec import Codec, JsonCodec
from .dsn import default_dsn
from .errors import Unacknowledged
from .hooks import JobHooks
from .job import Job, check_runnable_elsewhere, check_type_name
from .listener import Listener
from .records import ClaimedJob, JobRecord, Outcome, Status
from .retry import MAX_DELAY, RetryPolicy

log = logging.getLogger("jobq")

# Maintenance recovers expired leases in batches of this many rows.
MAINTENANCE_BATCH = 500

# prune deletes this many rows per statement.
PRUNE_BATCH = 1000

FINISHED = (Status.COMPLETED, Status.FAILED, Status.EXPIRED, Status.CANCELLED)

# Larger payloads are refused at enqueue: a queue row is no place for bulk data, and MySQL's
# default max_allowed_packet (16 MiB) would refuse the claim that reads it back.
MAX_PAYLOAD_BYTES = 8 * 2**20

# last_error keeps the end of a traceback, where the cause is.
MAX_ERROR_LENGTH = 8000

# Shared by every job without a policy of its own: it is immutable, and making one per job
# was a measurable share of enqueue_many.
DEFAULT_RETRY = RetryPolicy()

LEASE_EXPIRED_BEFORE_START = "Lease expired before execution started"
LEASE_EXPIRED = "Lease expired: the attempt was abandoned without an acknowledgement"
CANCELLED_WHILE_RUNNING = "Cancelled by an operator while it ran; the attempt ended: {}"

# Claims record where their attempt runs: this host, and the claiming process.
HOST = socket.gethostname()

Types = str | Iterable[str] | None

# The attempt whose handle() is running, for code deep inside a job (see current_claim),
# and the queue it was claimed from (see cancel_requested).
running: ContextVar[ClaimedJob | None] = ContextVar("jobq_running", default=None)
running_on: ContextVar[Queue | None] = ContextVar("jobq_running_on", default=None)


class Own(Enum):
    CONNECTION = "the queue's own connection"


# enqueue()'s default: write on the queue's own connection. A sentinel, not None, because an
# ORM's wrapper holds None while it is not connected, and that must not quietly mean "ours".
OWN_CONNECTION = Own.CONNECTION


def application_connection(connection: Any) -> Any:
    """The driver connection to write on for `connection=`, or None for the queue's own."""
    return None if connection is OWN_CONNECTION else backends.unwrap(connection)


def current_claim() -> ClaimedJob | None:
    """The attempt being run, from inside a job's handle(): its id makes a natural
    idempotency key for work that must not happen twice."""
    return running.get()


def cancel_requested() -> bool:
    """From inside a job's handle(): whether an operator asked to cancel this job. A job that
    can stop early polls this now and then (each call is one small query) and returns; under
    jobq-supervise the worker is stopped for it anyway, within a renewal interval."""
    claim, queue = running.get(), running_on.get()
    if claim is None or queue is None:
        raise RuntimeError("cancel_requested() is for a job's handle(), while it runs")
    return queue.backend.cancel_requested(claim.id, claim.token)


def runner() -> Runner:
    return Runner(HOST, os.getpid())


def never() -> bool:
    return False


def type_list(types: Types) -> tuple[str, ...]:
    if types is None:
        return ()
    # Each type costs a claim one probe: a repeated one would only cost it twice.
    names = (types,) if isinstance(types, str) else tuple(dict.fromkeys(types))
    for name in names:
        check_type_name(name)
    return names


def finished_statuses(statuses: Iterable[Status | str] | None) -> tuple[Status, ...]:
    """The statuses prune may delete, checked: finished ones only, at least one."""
    if statuses is None:
        return FINISHED
    chosen = tuple(dict.fromkeys(statuses if not isinstance(statuses, str) else [statuses]))
    names = ", ".join(str(status) for status in FINISHED)
    for status in chosen:
        if status not in FINISHED:
            raise ValueError(f"prune deletes only finished jobs ({names}), not {status!r}")
    if not chosen:
        raise ValueError(f"prune needs at least one status of {names}")
    return tuple(Status(status) for status in chosen)


def check_minutes(minutes: object) -> int:
    """A window of the status page's figures: whole minutes, up to a day."""
    if isinstance(minutes, bool) or not isinstance(minutes, int) or not 0 < minutes <= 1440:
        raise ValueError(f"minutes must be a whole number from 1 to 1440, got {minutes!r}")
    return minutes


def seconds_of(value: float | timedelta, what: str) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not math.isfinite(seconds) or seconds < 0 or seconds > MAX_DELAY:
        raise ValueError(f"{what} must be between 0 and {MAX_DELAY:.0f} seconds, got {value!r}")
    return seconds


def aware(value: datetime, what: str) -> datetime:
    if value.tzinfo is None:
        raise ValueError(f"{what} must be a timezone-aware datetime, got {value!r}")
    return value


def printable(error: BaseException) -> str:
    """repr(error), or its class name if its own __repr__ fails: a log line must not."""
    try:
        return repr(error)
    except Exception:
        return f"<{type(error).__name__}: repr() failed>"


def describe(error: BaseException | str) -> str:
    text = error if isinstance(error, str) else "".join(traceback.format_exception(error))
    # A NUL byte or a lone surrogate in an exception's message would make the database
    # refuse the failure itself, and the attempt could never be recorded.
    text = text.rstrip().replace("\x00", "\\x00")
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= MAX_ERROR_LENGTH else "…" + text[-MAX_ERROR_LENGTH:]


@dataclass(frozen=True)
class Schedule:
    """When a job may run and until when, as enqueue's options give it, checked."""

    scheduled_at: datetime | None
    delay: float
    deadline: datetime | None
    deadline_in: float | None

    @classmethod
    def of(
        cls,
        delay: float | timedelta | None,
        scheduled_at: datetime | None,
        deadline: datetime | float | timedelta | None,
    ) -> Schedule:
        if delay is not None and scheduled_at is not None:
            raise ValueError("give either delay or scheduled_at, not both")
        absolute_deadline = relative_deadline = None
        if isinstance(deadline, datetime):
            absolute_deadline = aware(deadline, "deadline")
        elif deadline is not None:
            relative_deadline = seconds_of(deadline, "deadline")
        return cls(
            scheduled_at=None if scheduled_at is None else aware(scheduled_at, "scheduled_at"),
            delay=0.0 if delay is None else seconds_of(delay, "delay"),
            deadline=absolute_deadline,
            deadline_in=relative_deadline,
        )


class Queue:
    """A job queue in one database, reached through one connection.

    A Queue is not thread-safe: give each thread or process its own.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        lease_duration: float = 600,
        codec: Codec | None = None,
        listener: Listener | None = None,
    ) -> None:
        if not isinstance(lease_duration, int | float) or not 0 < lease_duration <= MAX_DELAY:
            raise ValueError(
                f"lease_duration must be a positive number of seconds, got {lease_duration!r}"
            )
        self.backend = backend
        self.lease_duration = float(lease_duration)
        self.codec: Codec = codec or JsonCodec()
        self.listener = listener or Listener()
        # Set by jobq's own workers when the application declared hooks (see hooks.py).
        self.hooks: JobHooks | None = None

    @classmethod
    def connect(
        cls,
        dsn: str | None = None,
        lease_duration: float = 600,
        codec: Codec | None = None,
        listener: Listener | None = None,
        listen_dsn: str | None = None,
    ) -> Queue:
        """Open a queue on its own connection; dsn defaults to JOBQ_DSN, then ./jobq.sqlite3.
        listen_dsn: PostgreSQL through a transaction pooler only, a direct connection that
        idle workers wait for wake-ups on (without it they poll)."""
        return cls(
            backends.connect(dsn or default_dsn(), listen_dsn),
            lease_duration=lease_duration,
            codec=codec,
            listener=listener,
        )

    @classmethod
    def from_connection(
        cls,
        connection: Any,
        lease_duration: float = 600,
        codec: Codec | None = None,
        listener: Listener | None = None,
    ) -> Queue:
        """A queue on a connection the application owns (and closes)."""
        return cls(
            backends.wrap(connection),
            lease_duration=lease_duration,
            codec=codec,
            listener=listener,
        )

    @property
    def connection(self) -> Any:
        return self.backend.connection

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def install(self) -> tuple[int, int]:
        """Create the tables, or bring them up to date; safe to run again and concurrently.
        Returns the schema's version before and after (0 before: it was created)."""
        return self.backend.install()

    # -- producing -------------------------------------------------------------------------

    def enqueue(
        self,
        job: Job,
        type: str | None = None,
        delay: float | timedelta | None = None,
        scheduled_at: datetime | None = None,
        deadline: datetime | float | timedelta | None = None,
        retry: RetryPolicy | None = None,
        connection: Any = OWN_CONNECTION,
        priority: int = 0,
    ) -> int:
        """Store a job and return its id. Of the jobs ready to run, those of the highest
        `priority` (-1000 to 1000) run first, in schedule order among equals.

        With `connection` (a psycopg 3, PyMySQL or sqlite3 connection, or Django's
        `connection`/`connections[alias]`), the row is written on the application's own
        connection and so belongs to its transaction: a rollback drops the job.
        """
        when = Schedule.of(delay, scheduled_at, deadline)
        row = self._new_job(job, type, when, retry, controls.checked_priority(priority))
        return self.backend.insert(row, application_connection(connection))

    def enqueue_many(
        self,
        jobs: Iterable[Job],
        type: str | None = None,
        delay: float | timedelta | None = None,
        scheduled_at: datetime | None = None,
        deadline: datetime | float | timedelta | None = None,
        retry: RetryPolicy | None = None,
        connection: Any = OWN_CONNECTION,
        priority: int = 0,
    ) -> list[int]:
        """Store many jobs, each as enqueue() would with these options, and return their ids
        in the order given: one round trip per chunk of rows, and one wake-up per type.

        Every job is checked before any is written. Without `connection` all are written in
        one transaction; with it, on the application's connection and in its transaction.
        """
        when = Schedule.of(delay, scheduled_at, deadline)
        level = controls.checked_priority(priority)
        rows = [self._new_job(job, type, when, retry, level) for job in jobs]
        if not rows:
            return []
        return self.backend.insert_many(rows, application_connection(connection))

    def _new_job(
        self, job: Job, type: str | None, when: Schedule, retry: RetryPolicy | None, priority: int
    ) -> NewJob:
        """The row for one job, checked as every enqueue checks it."""
        if not isinstance(job, Job):
            raise TypeError(f"can only enqueue jobq.Job instances, got {job!r}")
        check_runnable_elsewhere(job.__class__)
        job_type = job.type if type is None else type
        check_type_name(job_type)
        policy = retry or job.retry or DEFAULT_RETRY
        if not isinstance(policy, RetryPolicy):
            raise TypeError(f"retry must be a jobq.RetryPolicy, got {policy!r}")
        class_name, payload = self.codec.encode(job)
        size = len(payload) if payload.isascii() else len(payload.encode("utf-8", "surrogatepass"))
        if size > MAX_PAYLOAD_BYTES:
            raise ValueError(
                f"{class_name}: payload of {size / 2**20:.1f} MiB is over jobq's limit of "
                f"{MAX_PAYLOAD_BYTES // 2**20} MiB; store large data elsewhere and enqueue a "
                "reference to it"
            )
        return NewJob(
            type=job_type,
            class_name=class_name,
            payload=payload,
            retry=policy,
            scheduled_at=when.scheduled_at,
            delay=when.delay,
            deadline=when.deadline,
            deadline_in=when.deadline_in,
            priority=priority,
        )

    # -- consuming -------------------------------------------------------------------------

    def _consumer(self, operation: str) -> Backend:
        """The backend, once it is known to be fit for a consumer operation."""
        problem = self.backend.transaction_problem()
        if problem:
            raise RuntimeError(
                f"{operation} needs a connection in autocommit mode with no open transaction: "
                f"{problem}"
            )
        return self.backend

    def process_jobs(self, limit: int, type: Types = None) -> int:
        """Run maintenance once, then up to `limit` jobs one at a time; returns attempts run."""
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError(f"limit must be an int, got {limit!r}")
        if limit < 0:
            raise ValueError(f"limit must not be negative, got {limit}")
        if limit == 0:
            return 0
        types = type_list(type)
        self.run_maintenance()
        ran = 0
        claim = self.claim(types)
        while claim is not None:
            ran += 1
            _, claim = self.run_and_claim(claim, types, more=None if ran < limit else never)
            if claim is None and ran < limit:
                # A failed attempt claims nothing with its acknowledgement.
                claim = self.claim(types)
        return ran

    def process_next(self, type: Types = None) -> bool:
        """Claim and run one job, without maintenance; False when none was ready."""
        claim = self.claim(type)
        if claim is None:
            return False
        self.run(claim)
        return True

    def claim(self, type: Types = None) -> ClaimedJob | None:
        """Take one ready job for one attempt. No maintenance, no listener call."""
        backend = self._consumer("claim")
        types = type_list(type)
        token = secrets.token_hex(16)

        def attempt() -> ClaimedJob | None:
            lease = self.lease_duration
            return backend.claim(types, token, lease, expiry(lease), runner())

        return backend.retrying("claim", attempt)

    def run(self, claim: ClaimedJob) -> Outcome:
        """Run a claimed job to its acknowledgement: decode, check the lease, handle, ack.

        Only decoding and handle() fail the attempt. A BaseException from handle() (SystemExit,
        KeyboardInterrupt) fails it too, then propagates.
        """
        return self.run_and_claim(claim, more=never)[0]

    def run_and_claim(
        self,
        claim: ClaimedJob,
        type: Types = None,
        more: Callable[[], bool] | None = None,
    ) -> tuple[Outcome, ClaimedJob | None]:
        """run(), and when the job completed, claim the next job of `type` in the same commit
        as the acknowledgement (see complete_and_claim). `more`, if given, is asked once the
        job's code is done: False acknowledges alone. Returns the outcome and the new claim,
        if any.
        """
        outcome, next_claim = self._attempt(claim, type_list(type), more)
        if self.hooks is not None:
            self.hooks.after_job(claim, outcome)
        return outcome, next_claim

    def _attempt(
        self, claim: ClaimedJob, types: tuple[str, ...], more: Callable[[], bool] | None
    ) -> tuple[Outcome, ClaimedJob | None]:
        try:
            job = self.codec.decode(claim.class_name, claim.payload)
        except Exception as error:
            log.error("Could not decode job: %s", error, extra=job_extra(claim, "decode_failed"))
            return self._failed(claim, error), None
        log.info("Running job %d", claim.id, extra=job_extra(claim, "running"))
        self.listener.on_claimed(claim)
        if time.monotonic() >= claim.expires_monotonic:
            log.warning(LEASE_EXPIRED_BEFORE_START, extra=job_extra(claim, "lease_expired"))
            return self._failed(claim, LEASE_EXPIRED_BEFORE_START), None
        token, on = running.set(claim), running_on.set(self)
        try:
            if self.hooks is not None:
                self.hooks.before_job(claim)
            job.handle()
        except Exception as error:
            log.warning(
                "Job %d failed: %s", claim.id, printable(error), extra=job_extra(claim, "failed")
            )
            return self._failed(claim, error), None
        except BaseException as error:
            self._failed(claim, error)
            raise
        finally:
            running.reset(token)
            running_on.reset(on)
        self.listener.on_settling(claim)
        try:
            if more is None or more():
                outcome, next_claim = self._complete_and_claim(claim, types)
            else:
                outcome, next_claim = self._complete(claim), None
        except Exception as failure:
            raise Unacknowledged(claim, None) from failure
        self.listener.on_settled(claim, outcome)
        return outcome, next_claim

    def _failed(self, claim: ClaimedJob, error: BaseException | str) -> Outcome:
        self.listener.on_settling(claim)
        try:
            settled = self._settle_failure(claim, error)
        except Exception as failure:
            raise Unacknowledged(claim, error) from failure
        outcome = FAILURE_OUTCOMES[settled]
        self.listener.on_settled(claim, outcome)
        return outcome

    def _acknowledge(self, unacknowledged: Unacknowledged) -> Outcome:
        """Record, on this queue's connection, an outcome another connection could not."""
        claim, error = unacknowledged.claim, unacknowledged.error
        if error is None:
            outcome = self._complete(claim)
        else:
            outcome = FAILURE_OUTCOMES[self._settle_failure(claim, error)]
        self.listener.on_settled(claim, outcome)
        return outcome

    def complete(self, claim: ClaimedJob) -> bool:
        return self._complete(claim) is Outcome.COMPLETED

    def _complete(self, claim: ClaimedJob) -> Outcome:
        backend = self._consumer("complete")
        done = backend.retrying("complete", lambda: backend.complete(claim.id, claim.token))
        return self._completed(claim, done)

    def complete_and_claim(
        self, claim: ClaimedJob, type: Types = None
    ) -> tuple[bool, ClaimedJob | None]:
        """complete(), and claim the next job of `type` in the same commit: one round trip
        per job where the database takes both in one statement, one commit everywhere.
        Returns whether the completion applied, and the new claim (None: nothing was ready).
        If this raises, neither happened, or the outcome is unknown: the attempt's lease
        settles it, and a claim made unseen comes back after its own lease."""
        outcome, next_claim = self._complete_and_claim(claim, type_list(type))
        return outcome is Outcome.COMPLETED, next_claim

    def _complete_and_claim(
        self, claim: ClaimedJob, types: tuple[str, ...]
    ) -> tuple[Outcome, ClaimedJob | None]:
        backend = self._consumer("complete")
        token = secrets.token_hex(16)
        done, next_claim = backend.retrying(
            "complete",
            lambda: backend.complete_and_claim(
                claim.id, claim.token, types, token, self.lease_duration, runner()
            ),
        )
        return self._completed(claim, done), next_claim

    def _completed(self, claim: ClaimedJob, done: bool) -> Outcome:
        """Log and tell the listener how a completion went. A completion refused because the
        job was cancelled as it ran ends the job cancelled: the cancel committed first."""
        if done:
            log.info("Job %d completed", claim.id, extra=job_extra(claim, "completed"))
            self.listener.on_completed(claim)
            return Outcome.COMPLETED
        if self._end_cancelled(claim, "it completed, after the cancel"):
            return Outcome.CANCELLED
        self._ownership_lost(claim, "completion")
        return Outcome.LOST

    def _end_cancelled(self, claim: ClaimedJob, how: str) -> bool:
        """End an attempt whose acknowledgement was refused because an operator cancelled
        its job; False if the attempt had simply lost the job."""
        backend = self.backend
        error = CANCELLED_WHILE_RUNNING.format(how)
        ended = backend.retrying(
            "cancel", lambda: backend.end_cancelled(claim.id, claim.token, error)
        )
        if ended:
            log.info("Job %d cancelled", claim.id, extra=job_extra(claim, "cancelled"))
        return ended

    def fail(self, claim: ClaimedJob, error: BaseException | str) -> bool:
        """Record the attempt as failed; its retry policy decides whether the job runs again."""
        return self._settle_failure(claim, error) is not None

    def _settle_failure(self, claim: ClaimedJob, error: BaseException | str) -> Status | None:
        """fail(), returning the job's new status (None when ownership was lost)."""
        backend = self._consumer("fail")
        status, delay = next_step(claim.retry, claim.attempt)
        message = describe(error)
        settled = backend.retrying(
            "fail",
            lambda: backend.settle(claim.id, claim.token, status, message, delay, False),
        )
        if settled is None and self._end_cancelled(claim, message):
            settled = Status.CANCELLED
        elif settled is None:
            self._ownership_lost(claim, "failure")
        else:
            self.listener.on_failed(claim, error)
        return settled

    def _ownership_lost(self, claim: ClaimedJob, before: str) -> None:
        log.warning(f"Job ownership lost before {before}", extra=job_extra(claim, "lost"))
        self.listener.on_ownership_lost(claim)

    def renew(self, claim: ClaimedJob) -> ClaimedJob | None:
        """Extend the lease to now + lease_duration; None once the lease ended or was taken."""
        backend = self._consumer("renew")

        def attempt() -> ClaimedJob | None:
            expires = expiry(self.lease_duration)
            until = backend.renew(claim.id, claim.token, self.lease_duration)
            return None if until is None else claim.renewed(until, expires)

        return backend.retrying("renew", attempt)

    def renew_many(self, claims: Sequence[tuple[int, str]]) -> set[int]:
        """Extend many attempts' leases in one statement; returns the ids still owned."""
        return self._renewal_round(claims).extended

    def _renewal_round(self, claims: Sequence[tuple[int, str]]) -> Renewal:
        """renew_many(), and which of the attempts it extended an operator cancelled.

        This is the supervisor's renewal round: the caller anchors its own deadlines at the
        moment it called, which the lease can only outlast.
        """
        backend = self._consumer("renew")
        if not claims:
            return Renewal(set(), set())
        return backend.retrying("renew", lambda: backend.renew_many(claims, self.lease_duration))

    def run_maintenance(self) -> dict[str, int]:
        """Recover attempts whose lease ended, with each job's own retry policy, and expire
        pending jobs past their deadline. Returns how many jobs went where."""
        backend = self._consumer("maintenance")
        counts = {"requeued": 0, "failed": 0, "expired": 0}
        while True:
            leases = backend.retrying(
                "maintenance", lambda: backend.expired_leases(MAINTENANCE_BATCH)
            )
            for lease in leases:
                status = self._recover(lease)
                if status is not None:
                    counts["requeued" if status is Status.PENDING else str(status)] += 1
            if len(leases) < MAINTENANCE_BATCH:
                break
        counts["expired"] += backend.retrying("maintenance", backend.expire_overdue)
        if any(counts.values()):
            log.info(
                "Maintenance: %d requeued, %d failed, %d expired",
                counts["requeued"],
                counts["failed"],
                counts["expired"],
                extra={"event": "maintenance"},
            )
        return counts

    def _recover(self, lease: ExpiredLease) -> Status | None:
        """Settle one abandoned attempt by its job's policy; None if another process did."""
        backend = self.backend
        status, delay = next_step(lease.retry, lease.attempts)
        if lease.cancelled:
            error = CANCELLED_WHILE_RUNNING.format(LEASE_EXPIRED)
            ended = backend.retrying(
                "maintenance", lambda: backend.end_cancelled(lease.id, lease.token, error)
            )
            return Status.CANCELLED if ended else None
        settled = backend.retrying(
            "maintenance",
            lambda: backend.settle(lease.id, lease.token, status, LEASE_EXPIRED, delay, True),
        )
        if settled is not None:
            log.warning(
                "Recovered a job whose lease ended without an acknowledgement: now %s",
                settled,
                extra={
                    "event": "recovered",
                    "job_id": lease.id,
                    "job_type": lease.type,
                    "attempt": lease.attempts,
                },
            )
        return settled

    def prune(
        self, older_than: float | timedelta, statuses: Iterable[Status | str] | None = None
    ) -> int:
        """Delete finished jobs (of `statuses`, by default completed, failed and expired)
        that finished longer ago than this; returns how many.

        In batches of PRUNE_BATCH rows, each its own short transaction: a table of millions
        of finished rows is emptied without holding locks long or growing one transaction.
        """
        backend = self._consumer("prune")
        seconds = seconds_of(older_than, "older_than")
        chosen = finished_statuses(statuses)
        deleted = 0
        while True:
            batch = backend.retrying("prune", lambda: backend.prune(seconds, chosen, PRUNE_BATCH))
            deleted += batch
            if batch < PRUNE_BATCH:
                return deleted

    # -- for jobq's own processes -----------------------------------------------------------

    def _listen(self) -> bool:
        """Start receiving wake-ups for newly enqueued jobs; False where the database has
        none (or the connection is pooled without listen_dsn), and idle workers must poll."""
        return self.backend.listen()

    def _wait_for_jobs(self, timeout: float) -> bool:
        """After _listen() returned True: block up to `timeout` seconds for a wake-up."""
        return self.backend.wait_for_jobs(timeout)

    def _bound_statements(self, seconds: float) -> None:
        """Have the server give up on any statement of this connection that runs, or waits
        for a lock, longer than about `seconds` (the renewer's connection)."""
        self.backend.bound_statements(seconds)

    # -- inspecting ------------------------------------------------------------------------

    def _depth(self) -> dict[tuple[str, str], int]:
        """{(type, status): number of jobs}, for the supervisor's metrics."""
        return {(name, str(status)): n for (name, status), n in self.backend.counts(None).items()}

    def get(self, job_id: int) -> JobRecord | None:
        return self.backend.get(job_id)

    # -- operating (the rules are in controls.py) ---------------------------------------------

    def jobs(
        self,
        status: Status | str | None = None,
        type: str | None = None,
        limit: int = 100,
        before_id: int | None = None,
    ) -> list[JobRecord]:
        """Jobs newest first, of one status and type if given; the next page starts below
        the last id of this one (before_id)."""
        return controls.jobs(self.backend, status, type, limit, before_id)

    def cancel(self, job_id: int) -> bool:
        """Cancel a pending job at once; a job in progress has its attempt stopped and ends
        cancelled (see the README). False for an unknown id or a finished job."""
        return controls.cancel(self.backend, job_id)

    def retry(self, job_id: int) -> bool:
        """Make a failed, expired or cancelled job pending now, with one more attempt
        allowed. False for an unknown id, another status, or a deadline that has passed
        (controls.why_not_retried says which)."""
        return controls.retry(self.backend, job_id)

    def pause(self, type: str) -> bool:
        """No worker claims jobs of this type until resume(); running ones finish. False if
        it was paused already."""
        return controls.pause(self.backend, type)

    def resume(self, type: str) -> bool:
        """Let workers claim this type again, waking idle ones; False if it was not paused."""
        return controls.resume(self.backend, type)

    def paused(self) -> set[str]:
        return self.backend.paused()

    def counts(self, type: str | None = None) -> dict[str, int]:
        """{status: number of jobs}, of one type or of all."""
        totals: dict[str, int] = {}
        for (_, status), n in self.backend.counts(type).items():
            totals[str(status)] = totals.get(str(status), 0) + n
        return totals

    def oldest_ready(self) -> dict[str, float]:
        """{type: seconds the oldest ready job of that type has been waiting}."""
        return self.backend.oldest_ready()

    def completions_per_minute(self, minutes: int = 60) -> list[int]:
        """Jobs completed in each of the last `minutes` minutes by the database's clock,
        oldest first: the last entry is the minute now ending."""
        by_age = self.backend.completions(check_minutes(minutes))
        return [by_age.get(ago, 0) for ago in reversed(range(minutes))]

    def recent_counts_by_type(self, minutes: int = 60) -> dict[str, dict[str, int]]:
        """{type: {status: number of jobs}}: every pending and in_progress job, and of the
        finished ones those that finished in the last `minutes` minutes. Unlike
        counts_by_type(), it reads indexes only, so it stays quick on a table of millions."""
        table: dict[str, dict[str, int]] = {}
        for (name, status), n in self.backend.recent_counts(check_minutes(minutes)).items():
            table.setdefault(name, {})[str(status)] = n
        return table

    def counts_by_type(self) -> dict[str, dict[str, int]]:
        """{type: {status: number of jobs}}."""
        table: dict[str, dict[str, int]] = {}
        for (name, status), n in self.backend.counts(None).items():
            table.setdefault(name, {})[str(status)] = n
        return table


FAILURE_OUTCOMES = {
    None: Outcome.LOST,
    Status.PENDING: Outcome.RETRIED,
    Status.FAILED: Outcome.FAILED,
    Status.EXPIRED: Outcome.EXPIRED,
    Status.CANCELLED: Outcome.CANCELLED,
}


def next_step(retry: RetryPolicy, attempts: int) -> tuple[Status, float]:
    """After a failed attempt: requeue after the policy's delay, or fail for good."""
    if retry.allows_another(attempts):
        return Status.PENDING, retry.delay_after(attempts)
    return Status.FAILED, 0.0


def job_extra(claim: ClaimedJob, event: str) -> dict[str, Any]:
    """Fields a structured log formatter can pick up."""
    return {"job_id": claim.id, "job_type": claim.type, "attempt": claim.attempt, "event": event}
