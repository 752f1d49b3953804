"""The producer's side that Queue and AsyncQueue share: enqueue() and enqueue_many() check
their arguments and make the rows here, once; each queue writes the rows its own way.

Generic in what the writes return: the ids themselves for Queue, awaitables of them for
AsyncQueue. So `await aqueue.enqueue(job)` checks the job when it is called, as
`queue.enqueue(job)` does, and writes it when awaited.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, Generic, TypeVar

from .. import backends
from ..backends.rows import NewJob
from ..codec import Codec
from ..job import Job
from ..retry import RetryPolicy
from .limits import queued_behind
from .new_jobs import Options, Schedule, new_jobs
from .unique_keys import UniqueKeys, unique_keys
from .workflows import parents_of

IdT = TypeVar("IdT")
IdsT = TypeVar("IdsT")


class Own(Enum):
    CONNECTION = "the queue's own connection"


# enqueue()'s default: write on the queue's own connection. A sentinel, not None, because an
# ORM's wrapper holds None while it is not connected, and that must not quietly mean "ours".
OWN_CONNECTION = Own.CONNECTION


def application_connection(connection: Any) -> Any:
    """The driver connection to write on for `connection=`, or None for the queue's own."""
    return None if connection is OWN_CONNECTION else backends.unwrap(connection)


class Producing(ABC, Generic[IdT, IdsT]):
    codec: Codec

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
        unique_key: str | None = None,
        after: Iterable[int] | None = None,
    ) -> IdT:
        """Store a job and return its id. Of the jobs ready to run, those of the highest
        `priority` (-1000 to 1000) run first, in schedule order among equals.

        With `unique_key`, while a job with that key is pending or in progress, store
        nothing and return that job's id instead (race-free: the database's unique index
        decides). Up to 255 characters.

        With `connection` (a psycopg 3, PyMySQL or sqlite3 connection, or Django's
        `connection`/`connections[alias]`; for AsyncQueue, the async driver's connection),
        the row is written on the application's own connection and so belongs to its
        transaction: a rollback drops the job.

        With `after` (job ids), the job waits until every one of those jobs has completed,
        and is cancelled if one of them fails, expires or is cancelled (see workflows.py).
        """
        parents = parents_of(after, unique_key)
        options = Options.of(type, Schedule.of(delay, scheduled_at, deadline), retry, priority)
        (row,) = new_jobs(self.codec, [job], [unique_key], options)
        self._declare_limits([job], [row])
        return self._add(row, connection, parents)

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
        unique_key: UniqueKeys = None,
        after: Iterable[int] | None = None,
    ) -> IdsT:
        """Store many jobs, each as enqueue() would with these options, and return their ids
        in the order given: one round trip per chunk of rows, and one wake-up per type.

        Every job is checked before any is written. Without `connection` all are written in
        one transaction; with it, on the application's connection and in its transaction.
        `unique_key`: a function giving each job's key (or None), or a key (or None) per
        job; each keyed job is stored as enqueue(unique_key=...) stores it. `after`: every
        job waits for these jobs, as enqueue(after=...) makes it.
        """
        parents = parents_of(after, unique_key)
        options = Options.of(type, Schedule.of(delay, scheduled_at, deadline), retry, priority)
        given = list(jobs)
        keys = unique_keys(unique_key, given)
        rows = new_jobs(self.codec, given, keys, options)
        self._declare_limits(given, rows)
        # A job written blocked relies on its key's first jobs being written and run: a
        # taken unique key writes no row, and parents may cancel the lot, so those calls
        # leave their jobs ready, to the claims.
        if not parents and all(key is None for key in keys):
            rows = queued_behind(given, rows)
        return self._add_many(rows, connection, parents)

    @abstractmethod
    def _declare_limits(self, jobs: Sequence[Job], rows: Sequence[NewJob]) -> None:
        """Make the concurrency limits the jobs' classes declare known to the claims, before
        the rows are written (see jobq/limits.py)."""

    @abstractmethod
    def _add(self, row: NewJob, connection: Any, parents: tuple[int, ...]) -> IdT:
        """Write one checked row, on `connection` as enqueue's `connection=` names it, after
        `parents` (maybe none)."""

    @abstractmethod
    def _add_many(self, rows: list[NewJob], connection: Any, parents: tuple[int, ...]) -> IdsT:
        """Write the checked rows (maybe none), on `connection` as enqueue_many's names it,
        each after `parents` (maybe none)."""
