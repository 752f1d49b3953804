"""Concurrency limits as every backend provides them: the limits in force, an operator's
override, and what a job waits on. The counting itself is the database's, in the triggers
each backend's limits.py installs (see jobq/limits.py for why a slot is not a counter)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar, NamedTuple, TypeVar

from ..limits import CONCURRENCY
from .steps import Steps, count

T = TypeVar("T")

# How many rows refused by a concurrency limit one claim() looks past before it reports
# nothing ready: each refusal blocks its row, so the next probe starts beyond it.
REFUSALS = 8


# Each limit and how it stands, with the database's current time in place of {now}.
LIMITS_TEMPLATE = f"""
    SELECT l.type, l.name, l.declared, l.override,
        (SELECT count(*) FROM jobq_jobs r WHERE r.type = l.type
           AND r.status = 'in_progress' AND r.limit_key IS NOT NULL AND r.lease_until > {{now}}),
        (SELECT count(*) FROM jobq_jobs b WHERE b.type = l.type
           AND b.status = 'pending' AND b.blocked_on IS NOT NULL)
    FROM jobq_limits l WHERE l.name = '{CONCURRENCY}' ORDER BY l.type, l.name
"""


class LimitRow(NamedTuple):
    """A limit of one job type, and how it stands."""

    type: str
    name: str
    declared: int | None  # as the job class says, from its last enqueue
    override: int | None  # an operator's, which wins while set
    in_use: int  # slots held: attempts in progress with a live lease, over all keys
    blocked: int  # jobs waiting for a slot

    @property
    def in_force(self) -> int | None:
        return self.override if self.override is not None else self.declared


class Limits(ABC):
    # Each backend sets these from its limits.py; they take named parameters in its style.
    sql_declare_limit: ClassVar[str]
    sql_override_limit: ClassVar[str]
    sql_unblock_type: ClassVar[str]
    sql_limits: ClassVar[str]
    sql_limit_of: ClassVar[str]
    wake_params: ClassVar[Mapping[str, str]]
    placeholder: ClassVar[str]

    @abstractmethod
    def execute(self, sql: str, params: Any = None, connection: Any = None) -> int: ...

    @abstractmethod
    def fetchone(self, sql: str, params: Any = None) -> Any: ...

    @abstractmethod
    def fetchall(self, sql: str, params: Any = None) -> list[Any]: ...

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]: ...

    @abstractmethod
    def run(self, steps: Steps[T], connection: Any = None) -> T: ...

    def declare_limits_steps(self, declared: Sequence[tuple[str, int]]) -> Steps[None]:
        """Record job classes' declared limits, as (type, count) pairs (a no-op write for
        one unchanged): the Queue runs it, and the AsyncQueue awaits it on its driver."""
        for job_type, limit in declared:
            yield from count(
                self.sql_declare_limit, {"type": job_type, "name": CONCURRENCY, "count": limit}
            )

    def declare_limit(self, job_type: str, count: int) -> None:
        self.run(self.declare_limits_steps([(job_type, count)]))

    def override_limit(self, job_type: str, count: int | None) -> None:
        """Set (or with None, drop) an operator's limit, and let the type's blocked jobs be
        claimed again, so that a raised limit takes effect at once."""
        params = {"type": job_type, "name": CONCURRENCY, "count": count}
        with self.transaction():
            self.execute(self.sql_override_limit, params)
            self.execute(self.sql_unblock_type, {"type": job_type, **self.wake_params})

    def limits(self) -> list[LimitRow]:
        return [
            LimitRow(row[0], row[1], opt_int(row[2]), opt_int(row[3]), int(row[4]), int(row[5]))
            for row in self.fetchall(self.sql_limits)
        ]

    def blocked_ids(self, job_type: str | None, limit: int) -> list[int]:
        """The newest jobs waiting on a limit, of one type or of all."""
        which = "" if job_type is None else f" AND type = {self.placeholder.format('type')}"
        rows = self.fetchall(
            "SELECT id FROM jobq_jobs WHERE status = 'pending' AND blocked_on IS NOT NULL"
            f"{which} ORDER BY id DESC LIMIT {int(limit)}",
            {"type": job_type},
        )
        return [int(row[0]) for row in rows]

    def limit_of(self, job_id: int) -> tuple[str | None, str | None]:
        """A job's concurrency key, and the limit it waits on (None when it waits on none)."""
        row = self.fetchone(self.sql_limit_of, {"id": job_id})
        return (None, None) if row is None else (row[0], row[1])


def opt_int(value: Any) -> int | None:
    return None if value is None else int(value)
