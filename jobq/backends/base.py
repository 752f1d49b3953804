"""What every database backend provides, and the parts they share.

A backend owns one DB-API connection and all of its database's SQL. It knows nothing of
processes or workers; the queue core calls it and never asks which database it is.
"""

from __future__ import annotations

import logging
import time
from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, ClassVar, Self, TypeVar

from ..records import ClaimedJob, Status
from .batching import Batching
from .controls import Controls, policy_of
from .events import Events
from .gathering import Gathering
from .installing import Installing
from .leases import expiry
from .limits import Limits
from .nodes import Nodes
from .reporting import Reporting
from .retries import TRIES, pause_to_retry
from .rows import INSERT_NAMES, ExpiredLease, NewJob, Refused, Renewal, Runner, claimed_only
from .search import Search
from .shapes import CHUNK_ROWS, chunks
from .step_records import StepRecords
from .steps import CopyRows, Step, Steps, drive, every, fetched
from .uniqueness import Uniqueness
from .workflows import ENDINGS, KEPT, Workflows

log = logging.getLogger("jobq")

T = TypeVar("T")


def bring_forward(now: str) -> str:
    """Backend.bring_forward's statement, from the backend's clock; {types} per call. A job
    waiting for an event is left to its emit: brought forward, it would only wait again,
    and a drain would run it for ever."""
    return (
        f"UPDATE jobq_jobs SET scheduled_at = {now}, updated_at = {now} "
        f"WHERE status = 'pending' AND scheduled_at > {now} AND event_key IS NULL{{types}}"
    )


def work_left(ready: str) -> str:
    """Backend.work_left's statement, from the backend's condition of a ready job; {types}
    and {workers} are filled in per call."""
    return (
        f"SELECT EXISTS (SELECT 1 FROM jobq_jobs WHERE {ready} AND blocked_on IS NULL"
        "{types} AND type NOT IN (SELECT type FROM jobq_paused)) "
        "OR EXISTS (SELECT 1 FROM jobq_jobs WHERE status = 'in_progress' "
        "AND worker IN ({workers}))"
    )


class Backend(
    Uniqueness,
    Controls,
    Search,
    Installing,
    Batching,
    Reporting,
    Limits,
    Workflows,
    StepRecords,
    Events,
    Gathering,
    Nodes,
):
    kind: ClassVar[str]

    def __init__(self, connection: Any, *, owns_connection: bool) -> None:
        self.connection = connection
        self.owns_connection = owns_connection

    @classmethod
    def detached(cls, **facts: Any) -> Self:
        """This backend's statements and row shaping without a connection, for a driver that
        runs them elsewhere (jobq.AsyncQueue's). `facts`: what __init__ would have read from
        a connection (MySQL's `returning`); nothing here runs a statement."""
        backend = cls.__new__(cls)
        Backend.__init__(backend, None, owns_connection=False)
        vars(backend).update(facts)
        return backend

    def close(self) -> None:
        if self.owns_connection:
            self.connection.close()

    # -- rules every consumer operation follows -------------------------------------------

    @abstractmethod
    def transaction_problem(self) -> str | None:
        """Why this connection cannot run a consumer operation now, or None if it can."""

    @abstractmethod
    def is_transient(self, error: BaseException) -> bool:
        """A deadlock, lock-wait timeout or busy database: the statement may simply be rerun."""

    def failover_risk(self) -> str | None:
        """Why a failover of this database could lose commits it confirmed (asynchronous
        replication), or None when it cannot, or this backend cannot tell."""
        return None

    def recovered(self, error: BaseException) -> bool:
        """Whether this connection was set right after `error`, so that the operation that
        raised it may simply be rerun (see PostgresBackend's)."""
        return False

    def rollback_quietly(self) -> None:
        """Leave no half-open transaction behind a failed try."""
        try:
            self.connection.rollback()
        except Exception:
            log.debug("rollback after a failed statement failed too", exc_info=True)

    def open_application_transaction(self) -> Any:
        """The application's connection, when this backend was made on it and a transaction
        is open there: statements that must land together join that transaction, as opening
        one of jobq's own would commit the application's (MySQL) or fail (SQLite). Else
        None."""
        if not self.owns_connection and self.transaction_problem():
            return self.connection
        return None

    def retrying(self, what: str, operation: Callable[[], T]) -> T:
        """Run a consumer operation, rerunning it when the database aborted it transiently.

        Rerunning is safe because every transition is guarded by status and token: it applies
        at most once however often it is sent.

        Only on jobq's own connection: on one the application handed over, the transaction
        the error aborted may hold the application's own writes, so it runs once and the
        error reaches the caller as the driver raised it, for the caller to roll back and
        retry. jobq never rolls back or reruns a transaction it does not own.
        """
        if not self.owns_connection:
            return operation()
        for attempt in range(1, TRIES + 1):
            try:
                return operation()
            except Exception as error:
                if attempt == TRIES or not (self.is_transient(error) or self.recovered(error)):
                    raise
                self.rollback_quietly()
                time.sleep(pause_to_retry(what, attempt, error))
        raise AssertionError("unreachable")

    # -- plain DB-API helpers --------------------------------------------------------------

    def run(self, steps: Steps[T], connection: Any = None) -> T:
        """Run an operation's statements (see steps.py) on `connection`, else on this
        backend's own, in whatever transaction it has open."""
        target = connection or self.connection
        return drive(steps, lambda step: self.perform(step, target))

    def perform(self, step: Step, connection: Any) -> Any:
        """Run one statement and give what it asks for; a driver whose cursors differ overrides."""
        if isinstance(step, CopyRows):
            raise NotImplementedError("only PostgreSQL copies rows")
        with connection.cursor() as cursor:
            cursor.execute(step.sql, step.params)
            return fetched(cursor, step.fetch)

    def execute(self, sql: str, params: Any = None, connection: Any = None) -> int:
        with (connection or self.connection).cursor() as cursor:
            cursor.execute(sql, params)
            return int(cursor.rowcount)

    def fetchone(self, sql: str, params: Any = None) -> Any:
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone()

    def fetchall(self, sql: str, params: Any = None) -> list[Any]:
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall())

    def run_together(self, steps: Steps[T], connection: Any) -> T:
        """run() on the application's connection, for statements that must land together:
        in its transaction (a driver that could run them apart there overrides)."""
        return self.run(steps, connection)

    # -- the queue's operations ------------------------------------------------------------

    @abstractmethod
    def insert_steps(self, job: NewJob) -> Steps[int]: ...

    def insert_chunks_steps(self, jobs: Sequence[NewJob]) -> Steps[list[int]]:
        ids: list[int] = []
        for chunk in chunks(jobs, self.chunk_rows):
            ids += yield from self.insert_chunk_steps(chunk)
        return ids

    # The most rows one insert_chunk_steps statement takes.
    chunk_rows: ClassVar[int] = CHUNK_ROWS

    @abstractmethod
    def insert_chunk_steps(self, jobs: Sequence[NewJob]) -> Steps[list[int]]:
        """Insert the rows with one statement; returns their ids in the order given."""

    @abstractmethod
    def claim(
        self,
        types: Sequence[str],
        token: str,
        lease: float,
        expires_monotonic: float,
        runner: Runner,
    ) -> ClaimedJob | Refused | None:
        """Take the next ready job of one of `types` (any type when empty, never of a paused
        type) for one attempt, highest priority first, then in schedule order. REFUSED when
        a limit refused REFUSALS rows in a row: claim again, past them."""

    @abstractmethod
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction on this autocommit connection: committed when the block ends,
        rolled back if it raises."""
        yield

    def claim_within(
        self,
        types: Sequence[str],
        token: str,
        lease: float,
        expires_monotonic: float,
        runner: Runner,
    ) -> ClaimedJob | Refused | None:
        """claim(), inside a transaction the caller opened; the same where a claim is a
        single statement."""
        return self.claim(types, token, lease, expires_monotonic, runner)

    def complete_and_claim(
        self,
        job_id: int,
        token: str,
        types: Sequence[str],
        new_token: str,
        lease: float,
        runner: Runner,
        result: str | None = None,
    ) -> tuple[bool, ClaimedJob | None]:
        """Complete one attempt, storing its encoded result, and claim the next ready job for
        another, in one commit: both land or neither does, so a transient error can rerun the
        whole. Returns whether the completion applied (False: the attempt had lost the job)
        and the new claim, if any."""
        expires = expiry(lease)
        with self.transaction():
            done = self.complete(job_id, token, result)
            return done, claimed_only(self.claim_within(types, new_token, lease, expires, runner))

    # Each backend module sets these statements; they take named parameters in its own style.
    sql_complete: ClassVar[str]
    sql_settle: ClassVar[str]
    sql_expired_leases: ClassVar[str]
    sql_expire_overdue: ClassVar[str]
    # With {statuses} where the list of statuses goes.
    sql_prune: ClassVar[str]
    sql_oldest_finished: ClassVar[str]
    sql_work_left: ClassVar[str]
    sql_bring_forward: ClassVar[str]
    sql_counts: ClassVar[str]

    def complete(
        self,
        job_id: int,
        token: str,
        result: str | None = None,
        began: float | None = None,
        ended: float = 0.0,
    ) -> bool:
        """Complete an attempt that still holds its job, with its encoded result, in one
        statement; its checkpoint goes, its history gains the attempt. `began` and `ended`:
        how many seconds ago the attempt began (if its claim did not record its start: it
        waited in its worker's queue; None for a start nobody knows, which stays unknown)
        and ended."""
        params = {
            "id": job_id,
            "token": token,
            "result": result,
            "began": None if began is None else self.seconds(began),
            "ended": self.seconds(ended),
        }
        return self.completing(params)

    def completing(self, params: dict[str, Any]) -> bool:
        """Run sql_complete (see complete())."""
        return self.execute(self.sql_complete, params) == 1

    def completed_by(self, job_id: int, attempt: int, worker: str) -> bool:
        """Whether this attempt, claimed by `worker`, is the one that completed the job: a
        completion keeps the claim's attempt count and worker, though not its token."""
        mark = self.placeholder.format
        sql = (
            f"SELECT 1 FROM jobq_jobs WHERE id = {mark('id')} AND status = 'completed'"
            f" AND attempts = {mark('attempt')} AND worker = {mark('worker')}"
        )
        params = {"id": job_id, "attempt": attempt, "worker": worker}
        return self.fetchone(sql, params) is not None

    def settle(
        self,
        job_id: int,
        token: str,
        status: Status,
        error: str,
        delay: float,
        lease_ended_only: bool,
        error_class: str | None = None,
        began: float | None = None,
    ) -> Status | None:
        """End an attempt that did not complete: requeue it `delay` seconds from now when status
        is pending, else finish it with that status. A requeue that could only start after the
        job's deadline expires it instead. With lease_ended_only, this is maintenance's
        recovery and applies only while the lease has ended. The error (with its exception's
        class, when it was one) is the job's latest, and goes into its history. Returns the
        job's new status, or None when the attempt no longer owned the job. `began`: how
        many seconds ago the attempt began, if its claim did not record its start (it waited
        in its worker's queue); None when it never ran (an expired claim keeps no start)."""
        params = self.settle_params(
            job_id, token, status, error, delay, lease_ended_only, error_class, began
        )
        row = self.fetchone(self.sql_settle, params)
        return None if row is None else Status(row[0])

    def settle_params(
        self,
        job_id: int,
        token: str,
        status: Status,
        error: str,
        delay: float,
        lease_ended_only: bool,
        error_class: str | None = None,
        began: float | None = None,
    ) -> dict[str, Any]:
        return {
            "began": None if began is None else self.seconds(began),
            "id": job_id,
            "token": token,
            "status": str(status),
            "error": error,
            "error_class": error_class,
            "delay": self.seconds(delay),
            "lease_ended_only": lease_ended_only,
            **self.wake_params,
        }

    def expired_leases(self, limit: int) -> list[ExpiredLease]:
        return [
            ExpiredLease(
                id=int(row[0]),
                token=row[1],
                attempts=int(row[2]),
                retry=policy_of(row[3:7]),
                type=row[7],
                cancelled=bool(row[8]),
            )
            for row in self.fetchall(self.sql_expired_leases, {"limit": limit})
        ]

    def expire_overdue(self) -> int:
        """Mark pending jobs whose deadline passed as expired."""
        return self.execute(self.sql_expire_overdue)

    placeholder = "%({})s"

    def prune(self, older_than: float, statuses: Sequence[Status], batch: int) -> int | None:
        """Delete up to `batch` jobs with one of `statuses` that finished longer ago than
        `older_than` seconds, oldest first, but none that another job still needs (see
        workflows.KEPT). None, deleting nothing, while another connection is pruning: one
        pruner at a time across every node, so that two never fight over the same rows."""
        marks, params = self.marks("status", [str(status) for status in statuses])
        params |= {"older_than": self.seconds(older_than), "batch": batch}
        with self.pruning() as alone:
            return (
                self.delete_finished(self.sql_prune.format(statuses=marks), params)
                if alone
                else None
            )

    def delete_finished(self, sql: str, params: dict[str, Any]) -> int:
        """Run sql_prune; how many jobs it deleted."""
        return self.execute(sql, params)

    # How a SELECT of the ids to delete becomes sql_prune's kind of statement, which
    # delete_finished runs.
    deletion: ClassVar[str] = "DELETE FROM jobq_jobs WHERE id IN ({select})"

    def delete_ended(self, ids: Sequence[int]) -> int:
        """Delete those of these jobs that have ended and that no other job still needs, as
        prune keeps them (workflows.KEPT); how many it deleted."""
        marks, params = self.marks("id", list(ids))
        select = (
            f"SELECT id FROM jobq_jobs WHERE id IN ({marks}) AND status IN ({ENDINGS}) AND {KEPT}"
        )
        return self.delete_finished(self.deletion.format(select=select), params)

    @abstractmethod
    @contextmanager
    def pruning(self) -> Iterator[bool]:
        """The pruners' lock around one batch: yields whether this connection holds it (else
        another does, and the batch is left to it). Held for the batch alone: behind a
        transaction pooler a lock held between two transactions may stay on a server
        connection jobq no longer has."""
        yield True

    def work_left(self, types: Sequence[str], workers: Sequence[str]) -> bool:
        """Whether a job of `types` (every type when empty) is ready now, paused types and
        jobs blocked on a limit aside, or one of `workers` holds a job in progress: one
        statement, so one moment, for a supervisor deciding it has drained everything."""
        typed, params = self.marks("type", list(types))
        held, ids = self.marks("worker", list(workers) or [""])
        of_types = f" AND type IN ({typed})" if types else ""
        sql = self.sql_work_left.format(types=of_types, workers=held)
        return bool(self.fetchone(sql, params | ids)[0])

    def bring_forward(self, types: Sequence[str]) -> int:
        """For tests (jobq.testing.drain): make the pending jobs of `types` (all when empty)
        scheduled later due now. Returns how many."""
        typed, params = self.marks("type", list(types))
        of_types = f" AND type IN ({typed})" if types else ""
        return self.execute(self.sql_bring_forward.format(types=of_types), params)

    def newest_id(self) -> int:
        """The highest job id in the table, 0 for none."""
        return int(self.fetchone("SELECT max(id) FROM jobq_jobs")[0] or 0)

    def delete_after(self, job_id: int) -> int:
        """For tests (jobq.testing.queue): delete the jobs with ids above `job_id`."""
        sql = f"DELETE FROM jobq_jobs WHERE id > {self.placeholder.format('after')}"
        return self.execute(sql, {"after": job_id})

    def oldest_finished(self) -> float | None:
        """How many seconds ago the longest-kept finished job finished; None for none. It
        reads every finished row (no index orders them by their end): asked only for
        /metrics and `jobq stats`."""
        age = self.fetchone(self.sql_oldest_finished)[0]
        return None if age is None else max(0.0, float(age))

    def claimed_unstarted(self) -> dict[str, int]:
        """{type: jobs in progress that a prefetching worker claimed and has not started}
        (JobRecord.claimed_unstarted): few, at most a batch a worker, found among the
        in-progress rows."""
        rows = self.fetchall(
            "SELECT type, count(*) FROM jobq_jobs "
            "WHERE status = 'in_progress' AND attempted_at IS NULL GROUP BY type"
        )
        return {name: int(n) for name, n in rows}

    def counts(self, job_type: str | None) -> dict[tuple[str, Status], int]:
        return self.run(self.counts_steps(job_type))

    def counts_steps(self, job_type: str | None) -> Steps[dict[tuple[str, Status], int]]:
        """Jobs by (type, status), of one type or of all."""
        rows = yield from every(self.sql_counts, {"type": job_type})
        return {(name, Status(status)): int(n) for name, status, n in rows}

    def seconds(self, value: float) -> Any:
        """A duration as this database's statements take it (seconds unless overridden)."""
        return value

    def moment(self, value: datetime) -> Any:
        """An aware datetime as this database's statements take it (as is unless overridden)."""
        return value

    def insert_values(self, job: NewJob) -> tuple[Any, ...]:
        """The insert parameters' values, in the order of INSERT_NAMES. A tuple, for the bulk
        paths that take them by position: a dict per row cost enqueue_many's COPY about 1 us
        of its 7 us of client CPU per job."""
        retry = job.retry
        return (
            job.type,
            job.class_name,
            job.payload,
            retry.max_attempts,
            retry.backoff,
            retry.max_backoff,
            retry.jitter,
            None if job.scheduled_at is None else self.moment(job.scheduled_at),
            self.seconds(job.delay),
            None if job.deadline is None else self.moment(job.deadline),
            None if job.deadline_in is None else self.seconds(job.deadline_in),
            job.priority,
            job.unique_key,
            job.traceparent,
            job.tracestate,
            job.limit_key,
            job.rate_key,
            job.blocked_on,
        )

    def insert_params(self, job: NewJob) -> dict[str, Any]:
        """The named parameters every backend's insert statement takes."""
        return dict(zip(INSERT_NAMES, self.insert_values(job), strict=True))

    @abstractmethod
    def renew(self, job_id: int, token: str, lease: float) -> datetime | None: ...

    @abstractmethod
    def renew_many(
        self, claims: Sequence[tuple[int, str]], lease: float, started: Mapping[int, float]
    ) -> Renewal:
        """Extend every (id, token) lease that is still held, in one statement; returns the
        ids that were extended, and which of them an operator asked to cancel. An ended lease
        is never revived, and none is shortened. Of the attempts in `started` (job id ->
        seconds since it started), the start is recorded unless one was already."""

    @abstractmethod
    def bound_statements(self, seconds: float) -> None:
        """Have the server itself give up on any statement of this connection that runs, or
        waits for a lock, for longer than about `seconds`: a statement its client gave up on
        must not run on, holding row locks, seconds later."""

    def listen(self) -> bool:
        """Whether this connection can be woken for newly enqueued jobs, readying it; False
        where the database has none, and idle workers must poll. Wake-ups come while the
        worker is marked idle (mark_idle)."""
        return False

    def wait_for_jobs(self, timeout: float) -> bool:
        """After listen() returned True and mark_idle() marked the worker: block up to
        `timeout` seconds for a wake-up."""
        raise NotImplementedError
