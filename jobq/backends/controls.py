"""An operator's controls over jobs, as every backend provides them: list and read jobs,
cancel, retry, pause and resume a type, and the status page's figures, read from indexes.
Each backend's statements for them are in its database's controls.py; the rules around
them (what may be retried, what a refusal means) are the queue core's, in
jobq/queue/controls.py."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from ..attempt_log import Progress, history, loaded
from ..records import Horizon, JobRecord, Status
from ..retry import RetryPolicy, stored_policy
from .steps import Steps, count, every, one, value

T = TypeVar("T")

# What a JobRecord is read from, in this order, by every statement that reads records.
RECORD_COLUMNS = (
    "id, type, class_name, payload, status, attempts, max_attempts, backoff, max_backoff, "
    "jitter, last_error, scheduled_at, deadline, lease_until, created_at, updated_at, "
    "finished_at, priority, host, pid, cancel_requested_at, unique_key, worker, "
    "result, error_class, progress, checkpoint, attempt_log, started_at, attempted_at"
)

# The first part of every backend's sql_recent_counts: the unfinished jobs by type, each
# status from its own partial index. The backend's own part follows, the recently finished.
UNFINISHED_COUNTS = """
    SELECT type, 'pending', count(*) FROM jobq_jobs WHERE status = 'pending' GROUP BY type
    UNION ALL
    SELECT type, 'in_progress', count(*) FROM jobq_jobs WHERE status = 'in_progress'
    GROUP BY type
    UNION ALL
"""

# The statements of Controls.oldest_ready's probes, in each backend's placeholders: the first
# type after {after} that has a pending job; the highest priority below {below} that a
# pending job of {type} has; and {age}, the seconds since the first ready job (by {ready})
# of {type} at {priority} was scheduled. Each is one LIMIT 1 walk of the typed ready index,
# which {hint} names where a planner might walk another index and sort its rows instead.
# A job blocked by a limit cannot run, and the ready indexes leave it out: so do the probes.
UNBLOCKED = "status = 'pending' AND blocked_on IS NULL"
NEXT_PENDING_TYPE = (
    f"SELECT type FROM jobq_jobs{{hint}} WHERE {UNBLOCKED} AND type > {{after}} "
    "ORDER BY type LIMIT 1"
)
NEXT_PENDING_PRIORITY = (
    f"SELECT priority FROM jobq_jobs{{hint}} WHERE {UNBLOCKED} AND type = {{type}} "
    "AND priority < {below} ORDER BY priority DESC LIMIT 1"
)
READY_AGE = (
    "SELECT {age} FROM jobq_jobs{hint} WHERE {ready} AND blocked_on IS NULL AND type = {type} "
    "AND priority = {priority} ORDER BY scheduled_at LIMIT 1"
)
# Above the highest priority the schema allows (1000), and below every type name (none is
# empty): where the probes start.
ABOVE_ANY_PRIORITY = 1001
BELOW_ANY_TYPE = ""


def oldest_ready_probes(
    placeholder: str, age: str, ready: str, hint: str = ""
) -> tuple[str, str, str]:
    """NEXT_PENDING_TYPE, NEXT_PENDING_PRIORITY and READY_AGE for a backend whose named
    parameters look like `placeholder` with the name in braces (":{}", "%({})s")."""
    after, job_type, below, priority = (
        placeholder.format(name) for name in ("after", "type", "below", "priority")
    )
    return (
        NEXT_PENDING_TYPE.format(hint=hint, after=after),
        NEXT_PENDING_PRIORITY.format(hint=hint, type=job_type, below=below),
        READY_AGE.format(hint=hint, age=age, ready=ready, type=job_type, priority=priority),
    )


# One ordered walk of the jobs index (status, type, id) for a filtered list: the newest jobs
# of one status and type, below an id if {before} says so. {hint} names the index where a
# planner might sort another one's rows instead.
NEWEST_PROBE = (
    "SELECT id FROM jobq_jobs{hint} WHERE status = {status} AND type = {type}{before} "
    "ORDER BY id DESC LIMIT {limit}"
)
# The first type after {after} that has a job of status {status}, from the jobs index.
NEXT_TYPE_OF = (
    "SELECT type FROM jobq_jobs{hint} WHERE status = {status} AND type > {after} "
    "ORDER BY type LIMIT 1"
)
# Probes merged in one statement at most: SQLite allows 500 SELECTs in a compound one.
PROBES_PER_STATEMENT = 100

# The first page's bound (only a job with the largest 64-bit id is beyond it): the list is
# then a range of the primary key whether paged or not ("IS NULL OR" is none on SQLite).
LAST_ID = 2**63 - 1

# The statuses an operator may retry from.
RETRYABLE = (Status.FAILED, Status.EXPIRED, Status.CANCELLED)

# A retry's guard where the database can read the table it updates (PostgreSQL, SQLite): no
# active job holds the retried job's unique key. Put back, the job would be a second holder,
# and the unique index would abort the statement (and a PostgreSQL caller's transaction); so
# the conflict is a condition of the UPDATE, which then changes nothing, not an error.
NO_ACTIVE_HOLDER = """NOT EXISTS (
    SELECT 1 FROM jobq_jobs holder WHERE holder.unique_key = jobq_jobs.unique_key
      AND holder.status IN ('pending', 'in_progress'))"""


def policy_of(columns: Sequence[Any]) -> RetryPolicy:
    """The retry policy from its four columns, as any of the drivers returns them."""
    return stored_policy(int(columns[0]), float(columns[1]), float(columns[2]), bool(columns[3]))


class Controls(ABC):
    # Each backend sets these; they take named parameters in its own style.
    sql_get: ClassVar[str]
    # The newest jobs first, below an id: paged by id. Filtered lists walk the jobs index
    # instead (see jobs()).
    sql_jobs: ClassVar[str]
    # One probe of a filtered list, NEWEST_PROBE unless a backend has its own: it may take
    # the id bound as a condition, {before}, or as a value that may be NULL, {before_id}.
    newest_probe: ClassVar[str] = NEWEST_PROBE
    # What follows "FROM jobq_jobs" where a page's records are read by id.
    rowid_hint: ClassVar[str] = ""
    # What follows "FROM jobq_jobs" in NEWEST_PROBE and NEXT_TYPE_OF to make the planner
    # walk the jobs index.
    jobs_index_hint: ClassVar[str] = ""
    # A pending job is cancelled at once; one in progress is marked for its attempt to stop.
    sql_cancel: ClassVar[str]
    # Ends an attempt marked for cancelling, if that attempt still holds the job.
    sql_end_cancelled: ClassVar[str]
    sql_cancel_requested: ClassVar[str]
    sql_retry: ClassVar[str]
    sql_pause: ClassVar[str]
    sql_resume: ClassVar[str]
    sql_paused: ClassVar[str]
    # The oldest holder of the cleanup horizon as one row, (holder, age in seconds, backlog),
    # or none (see rows.Horizon).
    sql_horizon: ClassVar[str]
    # Completed jobs by whole minutes ago (0: the last minute), over the last %(minutes)s
    # minutes: a range scan of the finished_at index.
    sql_completions: ClassVar[str]
    # (type, status, buckets ago, count) of the jobs that finished in the last %(minutes)s
    # minutes, in buckets of %(bucket)s seconds (0: the one now ending): the same range of
    # the finished_at index as sql_completions.
    sql_endings: ClassVar[str]
    # (type, status, count) of every unfinished job, and of the jobs that finished in the
    # last %(minutes)s minutes: the partial indexes of pending and running jobs, and a range
    # of the finished_at index, where counting every status would read the whole table.
    sql_recent_counts: ClassVar[str]
    # Controls.oldest_ready's probes: NEXT_PENDING_TYPE, NEXT_PENDING_PRIORITY, READY_AGE.
    # A backend that finds the ages in one statement overrides oldest_ready() instead.
    sql_next_pending_type: ClassVar[str]
    sql_next_pending_priority: ClassVar[str]
    sql_ready_age: ClassVar[str]
    # How a statement names a parameter, by name.
    placeholder: ClassVar[str]
    # What the statements that make a job ready now (retry, release, requeue) take besides
    # their own parameters, to wake idle workers where the database can.
    wake_params: ClassVar[Mapping[str, str]] = {}

    @abstractmethod
    def run(self, steps: Steps[T], connection: Any = None) -> T: ...

    @abstractmethod
    def to_datetime(self, value: Any) -> datetime:
        """A time read from this database, as an aware UTC datetime."""

    def optional_datetime(self, value: Any) -> datetime | None:
        return None if value is None else self.to_datetime(value)

    def record(self, row: Sequence[Any]) -> JobRecord:
        """A JobRecord from a row of RECORD_COLUMNS."""
        optional = self.optional_datetime
        status = Status(row[4])
        running = status is Status.IN_PROGRESS
        return JobRecord(
            id=int(row[0]),
            type=row[1],
            class_name=row[2],
            payload=row[3],
            status=status,
            attempts=int(row[5]),
            retry=policy_of(row[6:10]),
            last_error=row[10],
            scheduled_at=self.to_datetime(row[11]),
            deadline=optional(row[12]),
            lease_until=optional(row[13]),
            created_at=self.to_datetime(row[14]),
            updated_at=self.to_datetime(row[15]),
            finished_at=optional(row[16]),
            priority=int(row[17]),
            # Where the last attempt ran is kept, but says where the job runs only while it does.
            host=row[18] if running else None,
            pid=None if not running or row[19] is None else int(row[19]),
            cancel_requested_at=optional(row[20]),
            unique_key=row[21],
            worker=row[22] if running else None,
            # As stored: the queue decodes it with its codec.
            result=row[23],
            error_class=row[24],
            progress=Progress.of(row[25]),
            checkpoint=loaded(row[26]),
            history=history(row[27]),
            started_at=optional(row[28]),
            attempted_at=optional(row[29]),
        )

    # Each operation below is written once, as its statements (see steps.py): the sync
    # method runs them on this backend's connection, jobq.AsyncQueue on an async driver's.

    def get(self, job_id: int) -> JobRecord | None:
        return self.run(self.get_steps(job_id))

    def get_steps(self, job_id: int) -> Steps[JobRecord | None]:
        row = yield from one(self.sql_get, {"id": job_id})
        return None if row is None else self.record(row)

    def jobs(
        self, status: Status | None, job_type: str | None, limit: int, before_id: int | None
    ) -> list[JobRecord]:
        return self.run(self.jobs_steps(status, job_type, limit, before_id))

    def jobs_steps(
        self, status: Status | None, job_type: str | None, limit: int, before_id: int | None
    ) -> Steps[list[JobRecord]]:
        """The newest `limit` jobs below `before_id`, optionally of one status and type.

        A filter that matches few jobs must not read the table until it has a page, so a
        filtered list walks the index (status, type, id) in id order, once per (status,
        type) pair it may match: every status of a type, or every type that has jobs of a
        status (found by stepping through the same index). Each walk stops at `limit` rows;
        the newest of them make the page."""
        if job_type is not None:
            pairs = [(each, job_type) for each in ([status] if status else list(Status))]
        elif status is not None:
            pairs = [(status, name) for name in (yield from self.types_of(status))]
        else:
            rows = yield from every(self.sql_jobs, {"before": before_id, "limit": limit})
            return [self.record(row) for row in rows]
        ids: list[int] = []
        for start in range(0, len(pairs), PROBES_PER_STATEMENT):
            chunk = pairs[start : start + PROBES_PER_STATEMENT]
            ids += (
                int(row[0]) for row in (yield from every(*self.newest(chunk, limit, before_id)))
            )
        ids = sorted(ids, reverse=True)[:limit]
        if not ids:
            return []
        return [self.record(row) for row in (yield from every(*self.by_ids(ids)))]

    def by_ids(self, ids: Sequence[int]) -> tuple[str, dict[str, Any]]:
        """The statement reading these jobs' records, newest first, and its parameters."""
        marks = ", ".join(self.placeholder.format(f"id{i}") for i in range(len(ids)))
        sql = (
            f"SELECT {RECORD_COLUMNS} FROM jobq_jobs{self.rowid_hint} WHERE id IN ({marks}) "
            "ORDER BY id DESC"
        )
        return sql, {f"id{i}": each for i, each in enumerate(ids)}

    def types_of(self, status: Status) -> Steps[list[str]]:
        """The types that have jobs of this status, one index probe each."""
        found: list[str] = []
        params = {"status": str(status), "after": BELOW_ANY_TYPE}
        while (name := (yield from value(self.next_type_of(), params))) is not None:
            found.append(name)
            params["after"] = name
        return found

    def next_type_of(self) -> str:
        """NEXT_TYPE_OF in this backend's placeholders and hint."""
        mark = self.placeholder.format
        return NEXT_TYPE_OF.format(
            hint=self.jobs_index_hint, status=mark("status"), after=mark("after")
        )

    def newest(
        self, pairs: Sequence[tuple[Status, str]], limit: int, before_id: int | None
    ) -> tuple[str, dict[str, Any]]:
        """One statement of the ids of the newest `limit` jobs of each (status, type) pair,
        below `before_id`, and its parameters."""
        mark = self.placeholder.format
        before = "" if before_id is None else f" AND id < {mark('before')}"
        probes = [
            self.newest_probe.format(
                hint=self.jobs_index_hint,
                status=mark(f"status{i}"),
                type=mark(f"type{i}"),
                before=before,
                before_id=mark("before"),
                limit=mark("limit"),
            )
            for i in range(len(pairs))
        ]
        params: dict[str, Any] = {"before": before_id, "limit": limit}
        for i, (status, name) in enumerate(pairs):
            params |= {f"status{i}": str(status), f"type{i}": name}
        if len(probes) == 1:
            return probes[0], params
        merged = " UNION ALL ".join(
            f"SELECT id FROM ({probe}) AS probe{i}" for i, probe in enumerate(probes)
        )
        return f"{merged} ORDER BY id DESC LIMIT {mark('limit')}", params

    def cancel(self, job_id: int) -> bool:
        return self.run(self.cancel_steps(job_id))

    def cancel_steps(self, job_id: int) -> Steps[bool]:
        """Cancel a pending job, or mark one in progress for its attempt to stop; False when
        it was neither."""
        return (yield from count(self.sql_cancel, {"id": job_id})) == 1

    def end_cancelled(self, job_id: int, token: str, error: str) -> bool:
        """End an attempt whose job was cancelled while it ran: the job is cancelled, and not
        retried. False if that attempt no longer held the job, or no cancel was asked."""
        params = {"id": job_id, "token": token, "error": error}
        return self.run(count(self.sql_end_cancelled, params)) == 1

    def cancel_requested(self, job_id: int, token: str) -> bool:
        """Whether an operator asked to cancel this attempt's job."""
        row = self.run(one(self.sql_cancel_requested, {"id": job_id, "token": token}))
        return row is not None and bool(row[0])

    def retry_steps(self, job_id: int) -> Steps[bool]:
        """A failed, expired or cancelled job whose deadline has not passed, and whose
        unique_key no active job holds, is made pending now, with at least one attempt left;
        False for any other. Only as part of Workflows.retry_after_parents_steps, which puts
        a job of a workflow back to waiting for its parents, in the same transaction."""
        return (yield from count(self.sql_retry, {"id": job_id, **self.wake_params})) == 1

    def pause(self, job_type: str) -> bool:
        return self.run(self.pause_steps(job_type))

    def pause_steps(self, job_type: str) -> Steps[bool]:
        """Stop claims of this type; False if it was paused already."""
        return (yield from count(self.sql_pause, {"type": job_type})) == 1

    def resume(self, job_type: str) -> bool:
        return self.run(self.resume_steps(job_type))

    def resume_steps(self, job_type: str) -> Steps[bool]:
        """Let claims of this type go on, waking idle workers where the database can; False
        if it was not paused."""
        return (yield from count(self.sql_resume, {"type": job_type})) == 1

    def paused(self) -> set[str]:
        return self.run(self.paused_steps())

    def paused_steps(self) -> Steps[set[str]]:
        return {row[0] for row in (yield from every(self.sql_paused))}

    def completions(self, minutes: int) -> dict[int, int]:
        return self.run(self.completions_steps(minutes))

    def completions_steps(self, minutes: int) -> Steps[dict[int, int]]:
        """{minutes ago: jobs completed then}, over the last `minutes` minutes."""
        rows = yield from every(self.sql_completions, {"minutes": minutes})
        return {int(ago): int(n) for ago, n in rows}

    def endings(self, minutes: int, bucket: int) -> dict[tuple[str, Status, int], int]:
        return self.run(self.endings_steps(minutes, bucket))

    def endings_steps(self, minutes: int, bucket: int) -> Steps[dict[tuple[str, Status, int], int]]:
        """{(type, status, buckets ago): jobs that ended so}, over the last `minutes`."""
        rows = yield from every(self.sql_endings, {"minutes": minutes, "bucket": bucket})
        return {(name, Status(status), int(ago)): int(n) for name, status, ago, n in rows}

    def horizon(self) -> Horizon:
        return self.run(self.horizon_steps())

    def horizon_steps(self) -> Steps[Horizon]:
        """The oldest holder of the cleanup horizon (see Horizon): sql_horizon's one row,
        (holder, age, backlog), or none when nothing holds it."""
        row = yield from one(self.sql_horizon)
        if row is None:
            return Horizon(0.0, 0, None)
        holder, age, backlog = row
        return Horizon(
            None if age is None else float(age),
            None if backlog is None else int(backlog),
            None if holder is None else str(holder),
        )

    def oldest_ready(self) -> dict[str, float]:
        return self.run(self.oldest_ready_steps())

    def oldest_ready_steps(self) -> Steps[dict[str, float]]:
        """Per type, how many seconds the oldest ready job has been ready.

        The typed ready index leads with (type, priority), so one min(scheduled_at) by type
        reads every ready row (seconds on MariaDB with 80,000 ready jobs). These probes skip
        through it instead, each a LIMIT 1 walk: to each type, then to each of that type's
        priorities, then to the first ready row of that (type, priority) in schedule order;
        the oldest of those is the type's. Round trips: about two per (type, priority)."""
        ages: dict[str, float] = {}
        job_type = yield from value(self.sql_next_pending_type, {"after": BELOW_ANY_TYPE})
        while job_type is not None:
            age = yield from self.oldest_ready_of(job_type)
            if age is not None:
                ages[job_type] = age
            job_type = yield from value(self.sql_next_pending_type, {"after": job_type})
        return ages

    def oldest_ready_of(self, job_type: str) -> Steps[float | None]:
        """The age of the oldest ready job of one type, from the first ready one of each of
        its priorities; None if none is ready."""
        ages = []
        params = {"type": job_type, "below": ABOVE_ANY_PRIORITY}
        while (priority := (yield from value(self.sql_next_pending_priority, params))) is not None:
            age = yield from value(self.sql_ready_age, {"type": job_type, "priority": priority})
            if age is not None:
                ages.append(float(age))
            params["below"] = priority
        return max(ages, default=None)

    def recent_counts(self, minutes: int) -> dict[tuple[str, Status], int]:
        return self.run(self.recent_counts_steps(minutes))

    def recent_counts_steps(self, minutes: int) -> Steps[dict[tuple[str, Status], int]]:
        rows = yield from every(self.sql_recent_counts, {"minutes": minutes})
        return {(name, Status(status)): int(n) for name, status, n in rows}
