"""Waiting for a job to end, for Queue.wait() and AsyncQueue.wait() alike: read the job's row
until it has finished, woken by the database where it sends a wake-up (PostgreSQL's NOTIFY),
polling with backoff elsewhere. Patience holds the rules both loops follow; each loop only
reads and pauses in its own way (async_waiting.py is the asyncio one)."""

from __future__ import annotations

import time

from ..records import JobRecord, Status
from .operating import Operating

FINISHED = frozenset((Status.COMPLETED, Status.FAILED, Status.EXPIRED, Status.CANCELLED))
# The poll's first interval and its ceiling, in seconds: a quick job is seen quickly, a long
# one costs a read every couple of seconds.
FIRST_POLL = 0.02
MAX_POLL = 2.0
# With wake-ups, the row is read again at least this often anyway: a wake-up sent while the
# connection was lost, or through a pooler that cannot LISTEN, is never missed for longer.
NOTIFIED_POLL = 10.0


class Patience:
    """One wait's deadline and the rhythm of its reads."""

    def __init__(self, job_id: int, timeout: float | None) -> None:
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not timeout >= 0  # NaN too
        ):
            raise ValueError(f"timeout must be a number of seconds >= 0 or None, got {timeout!r}")
        self.job_id = job_id
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.notified = False
        self.interval = FIRST_POLL
        self.status: Status | None = None

    def watching(self, notified: bool) -> bool:
        """Whether the database wakes this wait (as its watch said): then the row is read
        again only now and then, else more and more slowly."""
        self.notified = notified
        self.interval = NOTIFIED_POLL if notified else FIRST_POLL
        return notified

    def finished(self, record: JobRecord | None) -> JobRecord | None:
        """The record just read, if the job has finished; LookupError for no job."""
        if record is None:
            raise LookupError(f"no job with id {self.job_id}")
        self.status = record.status
        return record if record.status in FINISHED else None

    def pause(self) -> float:
        """How long to wait for a wake-up, or sleep, before the next read; TimeoutError once
        the deadline has passed."""
        pause = self.interval
        if self.deadline is not None:
            pause = min(pause, self.deadline - time.monotonic())
        if pause <= 0:
            raise TimeoutError(f"job {self.job_id} is still {self.status}")
        if not self.notified:
            self.interval = min(self.interval * 1.5, MAX_POLL)
        return pause


class Waiting(Operating):
    def wait(self, job_id: int, timeout: float | None = None) -> JobRecord:
        """Block until the job has finished (completed, failed, expired or cancelled) and
        return its record, the result decoded. TimeoutError after `timeout` seconds (None:
        no limit); LookupError for an unknown id. Needs the connection in autocommit mode
        with no open transaction: a transaction's snapshot might never see the job end."""
        patience = Patience(job_id, timeout)
        problem = self.backend.transaction_problem()
        if problem:
            raise RuntimeError(f"wait needs a connection in autocommit mode: {problem}")
        notified = patience.watching(self.backend.watch(job_id))
        try:
            while (record := patience.finished(self.get(job_id))) is None:
                if notified:
                    self.backend.wait_for_end(job_id, patience.pause())
                else:
                    time.sleep(patience.pause())
            return record
        finally:
            if notified:
                self.backend.unwatch()
