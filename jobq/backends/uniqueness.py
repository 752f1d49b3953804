"""What the database keeps unique for jobq: one active job per unique_key, and one taker per
schedule slot. Part of every backend (Backend inherits it); each backend sets the statements.

Both rest on the database's own uniqueness, never on a read-then-write: a unique index on
the key of pending and in_progress jobs (a partial index, or on MySQL/MariaDB a generated
column that is NULL for finished jobs), and a guard row per schedule that a slot's taker
moves forward with a compare-and-set, in the transaction that enqueues the slot's job.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from itertools import groupby
from typing import Any, ClassVar, NamedTuple, Protocol, TypeVar

from .rows import NewJob
from .steps import Steps, one

T = TypeVar("T")

# How often add() inserts again when the key's holder finished before it could be read.
KEY_TRIES = 5


class Guard(NamedTuple):
    """A schedule's guard row: the last slot it took, from which spec, and when the process
    that set that spec declared the schedule (None from before jobq recorded it)."""

    name: str
    spec: str
    slot: datetime
    job_id: int | None
    declared_at: datetime | None = None


class Rows(Protocol):
    """What these methods use of the backend they are part of."""

    connection: Any
    sql_unique_holder: ClassVar[str]
    sql_clock: ClassVar[str]
    sql_guards: ClassVar[str]
    sql_create_guard: ClassVar[str]
    sql_advance_guard: ClassVar[str]
    sql_guard_job: ClassVar[str]
    sql_is_active: ClassVar[str]

    def execute(self, sql: str, params: Any = None, connection: Any = None) -> int: ...
    def fetchone(self, sql: str, params: Any = None) -> Any: ...
    def fetchall(self, sql: str, params: Any = None) -> list[Any]: ...
    def to_datetime(self, value: Any) -> datetime: ...
    def optional_datetime(self, value: Any) -> datetime | None: ...
    def moment(self, value: datetime) -> Any: ...
    def transaction(self) -> AbstractContextManager[None]: ...
    def run(self, steps: Steps[T], connection: Any = None) -> T: ...
    def run_together(self, steps: Steps[T], connection: Any) -> T: ...
    def insert_steps(self, job: NewJob) -> Steps[int]: ...
    def insert_chunks_steps(self, jobs: Sequence[NewJob]) -> Steps[list[int]]: ...
    def insert_unique_steps(self, job: NewJob) -> Steps[int | None]: ...
    def unique_holder_steps(self, key: str) -> Steps[int | None]: ...
    def key_params(self, key: str) -> dict[str, Any]: ...
    def add_steps(self, job: NewJob) -> Steps[int]: ...
    def add_many_steps(self, jobs: Sequence[NewJob]) -> Steps[list[int]]: ...


class Uniqueness:
    def add(self: Rows, job: NewJob, connection: Any = None) -> int:
        return self.run(self.add_steps(job), connection)

    def add_steps(self: Rows, job: NewJob) -> Steps[int]:
        """Insert a job, or with a unique_key that an active job holds, return that job's id.

        Never a read-then-write: the insert itself defers to the unique index, and only when
        it inserted nothing is the holder read (on the same connection, so in the caller's
        transaction). Should the holder finish in between, the key is free: insert again.
        """
        key = job.unique_key
        if key is None:
            return (yield from self.insert_steps(job))
        for _ in range(KEY_TRIES):
            found = yield from self.insert_unique_steps(job)
            if found is None:
                found = yield from self.unique_holder_steps(key)
            if found is not None:
                return found
        raise RuntimeError(f"unique_key {key!r}: its holder kept finishing; enqueue again")

    def add_many(self: Rows, jobs: Sequence[NewJob], connection: Any = None) -> list[int]:
        """Insert every row, on `connection` in its transaction, or else in a transaction of
        this backend's own; returns the ids in the order given."""
        if connection is not None:
            return self.run_together(self.add_many_steps(jobs), connection)
        with self.transaction():
            return self.run(self.add_many_steps(jobs))

    def add_many_steps(self: Rows, jobs: Sequence[NewJob]) -> Steps[list[int]]:
        """The rows in chunks, where rows with a unique_key are each added as add() does, in
        the order given: a key repeated in the batch gives its first row's id."""
        ids: list[int] = []
        for keyed, run in groupby(jobs, key=lambda job: job.unique_key is not None):
            rows = list(run)
            if keyed:
                for job in rows:
                    ids.append((yield from self.add_steps(job)))
            else:
                ids += yield from self.insert_chunks_steps(rows)
        return ids

    @abstractmethod
    def insert_unique_steps(self: Rows, job: NewJob) -> Steps[int | None]:
        """Insert a job with a unique_key unless an active job holds the key, without ever
        failing on it (a failed statement would abort a PostgreSQL caller's transaction).
        Returns the new job's id, or the holder's where the statement tells it, else None."""

    # The active job holding the key %(key)s / :key.
    sql_unique_holder: ClassVar[str]

    def unique_holder(self: Rows, key: str, connection: Any = None) -> int | None:
        return self.run(self.unique_holder_steps(key), connection)

    def unique_holder_steps(self: Rows, key: str) -> Steps[int | None]:
        row = yield from one(self.sql_unique_holder, self.key_params(key))
        return None if row is None else int(row[0])

    def key_params(self: Rows, key: str) -> dict[str, Any]:
        return {"key": key}

    # -- schedules' guard rows (see scheduler.py) ---------------------------------------------

    sql_clock: ClassVar[str]
    sql_guards: ClassVar[str]
    # Each takes name, spec, slot; advance also last_spec and last_slot, and applies only
    # while the row still holds those: the compare-and-set that makes a slot taken once.
    sql_create_guard: ClassVar[str]
    sql_advance_guard: ClassVar[str]
    sql_guard_job: ClassVar[str]
    sql_is_active: ClassVar[str]

    def clock(self: Rows) -> datetime:
        """The database's now."""
        return self.to_datetime(self.fetchone(self.sql_clock)[0])

    def guards(self: Rows) -> dict[str, Guard]:
        return {
            row[0]: Guard(
                row[0], row[1], self.to_datetime(row[2]), row[3], self.optional_datetime(row[4])
            )
            for row in self.fetchall(self.sql_guards)
        }

    def create_guard(self: Rows, name: str, spec: str, slot: datetime, declared: datetime) -> None:
        """The guard row of a schedule seen for the first time; nothing if one exists."""
        params = {"name": name, "spec": spec, "slot": self.moment(slot)}
        self.execute(self.sql_create_guard, params | {"declared_at": self.moment(declared)})

    def advance_guard(
        self: Rows, guard: Guard, spec: str, slot: datetime, declared: datetime | None = None
    ) -> bool:
        """Move the guard to `slot` (and, given `declared`, to that declaration's spec) if it
        still holds what `guard` read; whether it did."""
        params = {
            "name": guard.name,
            "spec": spec,
            "slot": self.moment(slot),
            "last_spec": guard.spec,
            "last_slot": self.moment(guard.slot),
            "declared_at": None if declared is None else self.moment(declared),
        }
        return self.execute(self.sql_advance_guard, params) == 1

    def guard_job(self: Rows, name: str, job_id: int) -> None:
        self.execute(self.sql_guard_job, {"name": name, "job_id": job_id})

    def is_active(self: Rows, job_id: int) -> bool:
        """Whether the job is pending or in progress (a pruned job is neither)."""
        return self.fetchone(self.sql_is_active, {"id": job_id}) is not None
