"""A throwaway queue for an application's own tests: an in-memory SQLite database by
default, or the test's own database when given its DSN, the jobs the test made deleted
after it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from ..queue import Queue

# Where the pytest plugin's jobq_queue fixture looks for a DSN (none: in-memory SQLite).
DSN_VARIABLE = "JOBQ_TEST_DSN"
MEMORY = "sqlite:///:memory:"


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
