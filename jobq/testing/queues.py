"""A throwaway queue for an application's own tests: an in-memory SQLite database by
default, or the test's own database when given its DSN, the jobs the test made deleted
after it. The async one is an AsyncQueue with a Queue on the same database beside it, through
which drain() claims and acknowledges, as the AsyncQueue has no consumer side."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from weakref import WeakKeyDictionary

from ..queue import Queue
from ..queue.asynchronous import AsyncQueue

# Where the pytest plugin's jobq_queue fixture looks for a DSN (none: in-memory SQLite).
DSN_VARIABLE = "JOBQ_TEST_DSN"
MEMORY = "sqlite:///:memory:"
# Each throwaway AsyncQueue's Queue on the same database.
COMPANIONS: WeakKeyDictionary[AsyncQueue, Queue] = WeakKeyDictionary()


@contextmanager
def queue(dsn: str | None = None, lease_duration: float = 600) -> Iterator[Queue]:
    """A Queue with jobq's tables, for one test.

    Without `dsn` (nor JOBQ_TEST_DSN) it is an in-memory SQLite database, gone with the
    queue. With one (PostgreSQL, MySQL or an SQLite file), the tables are created or
    upgraded, and the jobs made while the block ran are deleted as it ends; jobs that
    were there before are left alone."""
    chosen = dsn or os.environ.get(DSN_VARIABLE) or MEMORY
    with Queue.connect(chosen, lease_duration=lease_duration) as made:
        made.install()
        before = made.backend.newest_id()
        try:
            yield made
        finally:
            if chosen != MEMORY:
                made.backend.delete_after(before)


@asynccontextmanager
async def async_queue(
    dsn: str | None = None, lease_duration: float = 600
) -> AsyncIterator[AsyncQueue]:
    """An AsyncQueue with jobq's tables, for one test, as queue() makes a Queue, which
    `await drain(...)` can run the jobs of.

    Without `dsn` (nor JOBQ_TEST_DSN) it is an SQLite file in a temporary directory, gone
    after the block: an in-memory database belongs to one connection, and the drain needs
    a second, beside the async driver's."""
    with ExitStack() as stack:
        chosen = dsn or os.environ.get(DSN_VARIABLE)
        if chosen is None:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="jobq-test-"))
            chosen = f"sqlite:///{Path(folder) / 'jobq.sqlite3'}"
        beside = stack.enter_context(queue(chosen, lease_duration))
        async with await AsyncQueue.connect(chosen) as made:
            COMPANIONS[made] = beside
            yield made


def companion(made: AsyncQueue) -> Queue:
    """The Queue beside an AsyncQueue that async_queue() made."""
    try:
        return COMPANIONS[made]
    except KeyError:
        raise TypeError(
            "drain() runs the jobs of an AsyncQueue made by jobq.testing.async_queue() or the "
            "jobq_async_queue fixture: an AsyncQueue cannot claim jobs itself"
        ) from None
