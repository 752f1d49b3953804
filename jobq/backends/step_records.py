"""A durable job's steps as recorded: one row a step in jobq_steps, keyed (job_id, name),
written only by the attempt that holds the job and its lease, read back whole when the job
runs again. The rows go with their job when it is deleted (a trigger)."""

from __future__ import annotations

from abc import abstractmethod
from datetime import datetime
from typing import Any, ClassVar, NamedTuple


class StepRecord(NamedTuple):
    """One recorded step as `jobq show` lists it: its value's size in bytes, not the value."""

    name: str
    attempt: int
    recorded_at: datetime
    size: int


def text(name: Any) -> str:
    """A step's name as read: MySQL's binary column gives bytes."""
    return name if isinstance(name, str) else bytes(name).decode("utf-8")


class StepRecords:
    # Inserts the step (id, name, value, size) as the attempt's (id, token), by one INSERT …
    # SELECT from the job's row: the row is there only while that attempt holds the job and
    # an unexpired lease, as for a checkpoint (results.py's ATTEMPT_WRITE). A locking read,
    # so that a recovery or claim committing meanwhile is seen, not a snapshot from before.
    sql_record_step: ClassVar[str]
    # Every step of job (id) as (name, value): one read of the primary key's prefix.
    sql_steps_of: ClassVar[str]
    # Every step of job (id) as (name, attempt, recorded_at, size), oldest first.
    sql_step_records: ClassVar[str]

    @abstractmethod
    def execute(self, sql: str, params: Any = None, connection: Any = None) -> int: ...

    @abstractmethod
    def fetchall(self, sql: str, params: Any = None) -> list[Any]: ...

    @abstractmethod
    def to_datetime(self, value: Any) -> datetime: ...

    def record_step(self, job_id: int, token: str, name: str, value: str, size: int) -> bool:
        """Record a step's encoded value for attempt (job_id, token); False when that attempt
        no longer holds the job, and nothing was recorded."""
        params = {"id": job_id, "token": token, "name": name, "value": value, "size": size}
        return self.execute(self.sql_record_step, params) == 1

    def steps_of(self, job_id: int) -> dict[str, str]:
        """The job's recorded steps, by name: their encoded values."""
        rows = self.fetchall(self.sql_steps_of, {"id": job_id})
        return {text(name): value for name, value in rows}

    def step_records(self, job_id: int) -> list[StepRecord]:
        rows = self.fetchall(self.sql_step_records, {"id": job_id})
        return [
            StepRecord(text(name), int(attempt), self.to_datetime(at), int(size))
            for name, attempt, at, size in rows
        ]
