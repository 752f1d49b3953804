"""The Queue: producers enqueue jobs, consumers claim, run and acknowledge them, operators
read and control them. The producer, consumer and operator sides are in producing.py,
consuming.py and operating.py; asynchronous.py is the AsyncQueue, for asyncio apps."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from .. import backends, tracing
from ..backends.base import Backend
from ..backends.limits import Declared
from ..backends.rows import NewJob
from ..backends.step_records import StepRecord
from ..codec import Codec, JsonCodec
from ..dsn import default_dsn
from ..hooks import JobHooks
from ..job import Job
from ..listener import Listener
from ..records import JobRecord, Status
from ..retry import MAX_DELAY
from ..schedules import REGISTERED, Periodic, scheduler
from . import maintenance, retention
from .batched import BatchConsuming
from .batches import Batch, then_row
from .events import checked_key, encoded_payload
from .limits import LimitControls
from .new_jobs import Options, Schedule, new_job, seconds_of, traced
from .nodes import declared_types
from .producing import OWN_CONNECTION, Producing, application_connection
from .waiting import Waiting
from .workflows import WorkflowReads

T = TypeVar("T")


class Queue(LimitControls, Producing[int, list[int]], BatchConsuming, Waiting, WorkflowReads):
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
        # What this queue's looks at the schedules keep between them (see run_schedules).
        self._watch = scheduler.Watch()
        self._declared: set[Declared] = set()

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

    # -- producing (enqueue and enqueue_many are Producing's) ----------------------------

    def _add(self, row: NewJob, connection: Any, parents: tuple[int, ...]) -> int:
        if parents:
            return self._add_many([row], connection, parents)[0]
        add = self.backend.add
        return self._publish("enqueue", connection, [row], lambda job, to: [add(job[0], to)])[0]

    def _add_many(self, rows: list[NewJob], connection: Any, parents: tuple[int, ...]) -> list[int]:
        if not rows:
            return []
        if parents:
            after = self.backend.add_after
            return self._publish(
                "enqueue", connection, rows, lambda jobs, to: after(jobs, parents, to)
            )
        return self._publish("enqueue_many", connection, rows, self.backend.add_many)

    def _publish(
        self,
        what: str,
        connection: Any,
        rows: list[NewJob],
        add: Callable[[list[NewJob], Any], list[int]],
    ) -> list[int]:
        """Write the rows with `add` (see _write) in their enqueue's span, which each row's
        trace context names while tracing is on."""
        with tracing.publishing(rows) as publication:
            stored = traced(rows, publication.context)
            ids = self._write(what, connection, lambda target: add(stored, target))
            publication.stored(ids)
            return ids

    def _write(self, what: str, connection: Any, write: Callable[[Any], T]) -> T:
        """Run `write` on the connection enqueue's `connection=` names, None meaning a
        transaction of the queue's own.

        A queue made from_connection() writes on the application's connection however it is
        called, and inside the application's transaction when one is open: opening one of
        its own there would commit the application's (MySQL) or fail (SQLite).

        Only a write on jobq's own connection is retried on a deadlock or lock timeout (there,
        nothing else was in the transaction that was rolled back). On the application's,
        the error propagates as the driver raised it: the transaction it aborted is the
        application's to roll back and retry (see the README's Transactions section).
        """
        backend = self.backend
        target = application_connection(connection)
        if target is None:
            target = backend.open_application_transaction()
        if target is not None:
            return write(target)
        return backend.retrying(what, lambda: write(None))

    # -- batches (see batches.py) ------------------------------------------------------------

    def batch(self, then: Job, connection: Any = OWN_CONNECTION) -> Batch:
        """A batch whose `then` job is enqueued, exactly once, after every member enqueued in
        the with block has ended (completed, failed, expired or cancelled); with no member,
        at once. With `connection`, the batch is written in the application's transaction."""
        return Batch(self, then_row(self, then), connection)

    def batch_status(self, batch_id: int) -> dict[str, int]:
        """The batch's members by status (every status, 0 where none)."""
        counts = self.backend.batch_counts(batch_id)
        return {str(status): counts.get(status, 0) for status in Status}

    def batch_jobs(self, batch_id: int, limit: int = 100) -> list[JobRecord]:
        """Up to `limit` of the batch's members, newest first."""
        return self.backend.batch_jobs(batch_id, limit)

    def cancel_batch(self, batch_id: int) -> int:
        """Cancel the batch's unfinished members (those running are asked to stop); its
        `then` job runs once they have ended. Returns how many it reached."""
        backend = self.backend
        return backend.retrying("cancel", lambda: backend.cancel_batch(batch_id))

    # -- periodic jobs ---------------------------------------------------------------------

    def run_schedules(
        self,
        schedules: Iterable[Periodic] | None = None,
        now: datetime | None = None,
        watch: scheduler.Watch | None = None,
    ) -> scheduler.Tick:
        """Enqueue the due slot of each schedule (by default those jobq.schedule() declared),
        each exactly once however many processes call this. `now` stands in for the
        database's clock (to replay a moment). Returns what was taken and when to look again.

        The slots that come after this queue's first call are each taken, however late the
        next call is; of those before, missed while nobody watched, only the latest. A
        process that outlives its queues (reconnecting) passes one `watch` to all of them.
        """
        backend = self._consumer("run_schedules")
        chosen = REGISTERED if schedules is None else schedules
        return scheduler.run_due(backend, self._periodic_row, chosen, now, watch or self._watch)

    def schedule_states(
        self, schedules: Iterable[Periodic] | None = None, stored: bool = False
    ) -> list[scheduler.State]:
        """Each schedule's spec, last slot taken, next slot, last job id and type. With
        `stored`, also the schedules known from the database alone (their guard rows), with
        the type the supervisors that run them declare (their heartbeats)."""
        chosen = REGISTERED if schedules is None else schedules
        types = declared_types(self.nodes()) if stored else None
        return scheduler.states(self.backend, chosen, types)

    def _periodic_row(self, periodic: Periodic, slot: datetime) -> NewJob:
        # The job is scheduled at its slot: the row records which slot it was enqueued for.
        # It carries no trace context, whatever span is current here: each slot's job starts
        # a trace of its own (see tracing.py).
        when = Schedule(scheduled_at=slot, delay=0.0, deadline=None, deadline_in=None)
        options = Options.of(periodic.type, when, periodic.retry, periodic.priority)
        return new_job(self.codec, periodic.job, options)

    # -- maintenance -----------------------------------------------------------------------

    def run_maintenance(self) -> dict[str, int]:
        """Recover attempts whose lease ended, with each job's own retry policy, and expire
        pending jobs past their deadline. Returns how many jobs went where."""
        return maintenance.recover_and_expire(self._consumer("maintenance"))

    def run_retention(self, kept: retention.Retention) -> retention.Cleaned:
        """Delete the finished jobs older than `kept` keeps them, as the supervisor's
        maintenance does (see retention.py)."""
        return retention.clean(self._consumer("retention"), kept)

    def _work_left(self, types: Iterable[str], workers: Iterable[str]) -> bool:
        """Whether a job of `types` (all when empty) is ready or one of `workers` (their
        ids) holds one in progress: what `jobq-supervise --exit-when-empty` waits out."""
        return self.backend.work_left(tuple(types), tuple(workers))

    def oldest_finished(self) -> float | None:
        """How many seconds ago the longest-kept finished job finished; None for none."""
        return self.backend.oldest_finished()

    def emit(self, key: str, payload: Any = None, connection: Any = OWN_CONNECTION) -> bool:
        """Emit the event `key` with `payload` (a JSON value) for the jobs that wait or will
        wait for it (jobq.wait_for). The first emit of a key wins: a later one changes
        nothing. With `connection`, or on a queue made from the application's connection in
        its transaction, it is written in that transaction and rolls back with it. Returns
        whether a job was waiting for it."""
        text = encoded_payload(payload)
        checked_key(key)
        backend = self.backend

        def write(target: Any) -> bool:
            if target is not None:
                return backend.run_together(backend.emit_steps(key, text), target)
            return backend.emit_now(key, text)

        return self._write("emit", connection, write)

    def wake(self, job_id: int) -> bool:
        """Run a pending job now rather than when it is due: a job asleep (jobq.sleep) goes
        on past its sleep, a job waiting for an event or its children looks again, and
        suspends again if they are not there yet. False when the job is not pending, or
        due already."""
        return self.backend.wake(job_id)

    def awaited(self, job_id: int) -> str | None:
        """The key of the event the job waits for (jobq.wait_for), or None."""
        return self.backend.awaited(job_id)

    def steps(self, job_id: int) -> list[StepRecord]:
        """The durable steps the job recorded (jobq.step()), oldest first: each one's name,
        the attempt that recorded it, when, and its encoded value's size in bytes."""
        return self.backend.step_records(job_id)

    def prune(
        self, older_than: float | timedelta, statuses: Iterable[Status | str] | None = None
    ) -> int:
        """Delete finished jobs (of `statuses`, by default every finished status) that
        finished longer ago than this; returns how many.

        In batches of maintenance.PRUNE_BATCH rows, each its own short transaction: a table
        of millions of finished rows is emptied without holding locks long or growing one
        transaction. A job another still needs is kept (see backends/workflows.py's KEPT),
        and should another process (a supervisor's retention) be pruning at a batch, this
        stops there and leaves the rest to it.
        """
        backend = self._consumer("prune")
        seconds = seconds_of(older_than, "older_than")
        chosen = maintenance.finished_statuses(statuses)
        return maintenance.prune(backend, seconds, chosen).deleted

    # -- for jobq's own processes -----------------------------------------------------------

    def _listen(self) -> bool:
        """Start receiving wake-ups for newly enqueued jobs; False where the database has
        none (or the connection is pooled without listen_dsn), and idle workers must poll."""
        return self.backend.listen()

    def _wait_for_jobs(self, timeout: float) -> bool:
        """After _listen() returned True and _mark_idle() marked this worker: block up to
        `timeout` seconds for a wake-up."""
        return self.backend.wait_for_jobs(timeout)

    def _mark_idle(self) -> bool:
        """Before _wait_for_jobs(): mark this worker idle (see Backend.mark_idle); True
        when it must claim once more before it waits."""
        return self.backend.mark_idle()

    def _unmark_idle(self) -> None:
        """A claim brought work after _mark_idle(): drop the mark."""
        self.backend.unmark_idle()

    def _bound_statements(self, seconds: float) -> None:
        """Have the server give up on any statement of this connection that runs, or waits
        for a lock, longer than about `seconds` (the renewer's connection)."""
        self.backend.bound_statements(seconds)
