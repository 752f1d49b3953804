"""An operator's controls over jobs, as every backend provides them: list and read jobs,
cancel, retry, pause and resume a type, and the status page's figures, read from indexes.
Each backend's statements for them are in its <database>_controls module; the rules around
them (what may be retried, what a refusal means) are the queue core's, in jobq/operator.py."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar

from ..records import JobRecord, Status
from ..retry import RetryPolicy, stored_policy

# What a JobRecord is read from, in this order, by every statement that reads records.
RECORD_COLUMNS = (
    "id, type, class_name, payload, status, attempts, max_attempts, backoff, max_backoff, "
    "jitter, last_error, scheduled_at, deadline, lease_until, created_at, updated_at, "
    "finished_at, priority, host, pid, cancel_requested_at, unique_key"
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

# The statuses an operator may retry from.
RETRYABLE = (Status.FAILED, Status.EXPIRED, Status.CANCELLED)


def policy_of(columns: Sequence[Any]) -> RetryPolicy:
    """The retry policy from its four columns, as any of the drivers returns them."""
    return stored_policy(int(columns[0]), float(columns[1]), float(columns[2]), bool(columns[3]))


class Controls(ABC):
    # Each backend sets these; they take named parameters in its own style.
    sql_get: ClassVar[str]
    # The newest jobs first, optionally of one status and type, below an id: paged by id.
    sql_jobs: ClassVar[str]
    # A pending job is cancelled at once; one in progress is marked for its attempt to stop.
    sql_cancel: ClassVar[str]
    # Ends an attempt marked for cancelling, if that attempt still holds the job.
    sql_end_cancelled: ClassVar[str]
    sql_cancel_requested: ClassVar[str]
    sql_retry: ClassVar[str]
    sql_pause: ClassVar[str]
    sql_resume: ClassVar[str]
    sql_paused: ClassVar[str]
    # Completed jobs by whole minutes ago (0: the last minute), over the last %(minutes)s
    # minutes: a range scan of the finished_at index.
    sql_completions: ClassVar[str]
    # (type, status, count) of every unfinished job, and of the jobs that finished in the
    # last %(minutes)s minutes: the partial indexes of pending and running jobs, and a range
    # of the finished_at index, where counting every status would read the whole table.
    sql_recent_counts: ClassVar[str]
    # How a statement names a parameter, by name.
    placeholder: ClassVar[str]

    @abstractmethod
    def execute(self, sql: str, params: Any = None, connection: Any = None) -> int: ...

    @abstractmethod
    def fetchone(self, sql: str, params: Any = None) -> Any: ...

    @abstractmethod
    def fetchall(self, sql: str, params: Any = None) -> list[Any]: ...

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
        )

    def get(self, job_id: int) -> JobRecord | None:
        row = self.fetchone(self.sql_get, {"id": job_id})
        return None if row is None else self.record(row)

    def jobs(
        self, status: Status | None, job_type: str | None, limit: int, before_id: int | None
    ) -> list[JobRecord]:
        params = {
            "status": None if status is None else str(status),
            "type": job_type,
            "before": before_id,
            "limit": limit,
        }
        return [self.record(row) for row in self.fetchall(self.sql_jobs, params)]

    def cancel(self, job_id: int) -> bool:
        """Cancel a pending job, or mark one in progress for its attempt to stop; False when
        it was neither."""
        return self.execute(self.sql_cancel, {"id": job_id}) == 1

    def end_cancelled(self, job_id: int, token: str, error: str) -> bool:
        """End an attempt whose job was cancelled while it ran: the job is cancelled, and not
        retried. False if that attempt no longer held the job, or no cancel was asked."""
        params = {"id": job_id, "token": token, "error": error}
        return self.execute(self.sql_end_cancelled, params) == 1

    def cancel_requested(self, job_id: int, token: str) -> bool:
        """Whether an operator asked to cancel this attempt's job."""
        row = self.fetchone(self.sql_cancel_requested, {"id": job_id, "token": token})
        return row is not None and bool(row[0])

    def retry(self, job_id: int) -> bool:
        """A failed, expired or cancelled job whose deadline has not passed is made pending
        now, with at least one attempt left; False for any other."""
        return self.execute(self.sql_retry, {"id": job_id}) == 1

    def pause(self, job_type: str) -> bool:
        """Stop claims of this type; False if it was paused already."""
        return self.execute(self.sql_pause, {"type": job_type}) == 1

    def resume(self, job_type: str) -> bool:
        """Let claims of this type go on, waking idle workers where the database can; False
        if it was not paused."""
        return self.execute(self.sql_resume, {"type": job_type}) == 1

    def paused(self) -> set[str]:
        return {row[0] for row in self.fetchall(self.sql_paused)}

    def completions(self, minutes: int) -> dict[int, int]:
        """{minutes ago: jobs completed then}, over the last `minutes` minutes."""
        rows = self.fetchall(self.sql_completions, {"minutes": minutes})
        return {int(ago): int(n) for ago, n in rows}

    def recent_counts(self, minutes: int) -> dict[tuple[str, Status], int]:
        rows = self.fetchall(self.sql_recent_counts, {"minutes": minutes})
        return {(name, Status(status)): int(n) for name, status, n in rows}
