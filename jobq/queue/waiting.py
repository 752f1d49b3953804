"""Waiting for a job to end: Queue.wait() reads the job's row until it has finished, woken by
the database where it sends a wake-up (PostgreSQL's NOTIFY), polling with backoff elsewhere."""

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


class Waiting(Operating):
    def wait(self, job_id: int, timeout: float | None = None) -> JobRecord:
        """Block until the job has finished (completed, failed, expired or cancelled) and
        return its record, the result decoded. TimeoutError after `timeout` seconds (None:
        no limit); LookupError for an unknown id. Needs the connection in autocommit mode
        with no open transaction: a transaction's snapshot might never see the job end."""
        if timeout is not None and not (isinstance(timeout, int | float) and timeout >= 0):
            raise ValueError(f"timeout must be a number of seconds >= 0 or None, got {timeout!r}")
        problem = self.backend.transaction_problem()
        if problem:
            raise RuntimeError(f"wait needs a connection in autocommit mode: {problem}")
        deadline = None if timeout is None else time.monotonic() + timeout
        notified = self.backend.watch(job_id)
        try:
            return self._wait(job_id, deadline, notified)
        finally:
            if notified:
                self.backend.unwatch()

    def _wait(self, job_id: int, deadline: float | None, notified: bool) -> JobRecord:
        interval = NOTIFIED_POLL if notified else FIRST_POLL
        while True:
            record = self.get(job_id)
            if record is None:
                raise LookupError(f"no job with id {job_id}")
            if record.status in FINISHED:
                return record
            pause = interval if deadline is None else min(interval, deadline - time.monotonic())
            if pause <= 0:
                raise TimeoutError(f"job {job_id} is still {record.status}")
            if notified:
                self.backend.wait_for_end(job_id, pause)
            else:
                time.sleep(pause)
                interval = min(interval * 1.5, MAX_POLL)
