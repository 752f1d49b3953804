"""The Queue's side of concurrency limits: recording each job class's declared limit as its
jobs are enqueued, an operator's override, and how the limits stand (see jobq/limits.py)."""

from __future__ import annotations

from collections.abc import Sequence

from ..backends.base import Backend
from ..backends.limits import LimitRow
from ..backends.rows import NewJob
from ..job import Job, check_type_name
from ..limits import check_count, concurrency_of
from ..records import JobRecord


def undeclared(
    jobs: Sequence[Job], rows: Sequence[NewJob], declared: set[tuple[str, int]]
) -> list[tuple[str, int]]:
    """The (type, count) limits the jobs' classes declare that a queue has not written yet
    (`declared`: those it has). A class whose declared count changed (a deploy) writes the
    new one; the claims read whatever the table says when they run."""
    found: dict[tuple[str, int], None] = {}
    for job, row in zip(jobs, rows, strict=True):
        limit = concurrency_of(job)
        if limit is not None and (row.type, limit.count) not in declared:
            found[(row.type, limit.count)] = None
    return list(found)


class LimitControls:
    """Mixed into the Queue."""

    backend: Backend
    # The (type, count) pairs this queue has written: each declaration once per queue.
    _declared: set[tuple[str, int]]

    def _declare_limits(self, jobs: Sequence[Job], rows: Sequence[NewJob]) -> None:
        """Record the declared limit of every limited type among `rows`, before they are
        written, so that their claims find it."""
        for job_type, count in undeclared(jobs, rows, self._declared):
            self.backend.declare_limit(job_type, count)
            self._declared.add((job_type, count))

    def set_limit(self, job_type: str, concurrency: int | None) -> None:
        """Override the concurrency limit of `job_type` at run time, on every node (None:
        back to what the job class declares). Claims read it as they run: a lowered limit
        lets no new attempt start beyond it, a raised one wakes the blocked jobs at once."""
        check_type_name(job_type)
        count = None if concurrency is None else check_count(concurrency, "concurrency")
        self.backend.retrying("set_limit", lambda: self.backend.override_limit(job_type, count))

    def limits(self) -> list[LimitRow]:
        """Every job type's concurrency limit: declared, overridden, slots in use and jobs
        blocked on it."""
        return self.backend.limits()

    def blocked(self, type: str | None = None, limit: int = 100) -> list[JobRecord]:
        """The newest jobs waiting for a slot (pending, stepped over by the claims until an
        attempt of their key ends), of one type if given."""
        found = (self.backend.get(job_id) for job_id in self.backend.blocked_ids(type, limit))
        return [record for record in found if record is not None]

    def waits_on(self, job_id: int) -> tuple[str | None, str | None]:
        """A job's concurrency key (None: its type has no limit), and the limit it waits on
        now (None: it waits on none)."""
        return self.backend.limit_of(job_id)
