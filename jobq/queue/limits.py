"""The Queue's side of concurrency limits: recording each job class's declared limit as its
jobs are enqueued, an operator's override, and how the limits stand (see jobq/limits.py)."""

from __future__ import annotations

from collections.abc import Sequence

from ..backends.base import Backend
from ..backends.limits import Declared, LimitRow
from ..backends.rows import NewJob
from ..job import Job, check_type_name
from ..limits import CONCURRENCY, RATE, check_count, check_per, concurrency_of, rate_of
from ..records import JobRecord


def undeclared(
    jobs: Sequence[Job], rows: Sequence[NewJob], declared: set[Declared]
) -> list[Declared]:
    """The limits the jobs' classes declare that a queue has not written yet (`declared`:
    those it has). A class whose declared numbers changed (a deploy) writes the new ones;
    the claims read whatever the table says when they run."""
    found: dict[Declared, None] = {}
    for job, row in zip(jobs, rows, strict=True):
        limit, rate = concurrency_of(job), rate_of(job)
        if limit is not None:
            found[(row.type, CONCURRENCY, limit.count, None)] = None
        if rate is not None:
            found[(row.type, RATE, rate.count, float(rate.per))] = None
    return [each for each in found if each not in declared]


def queued_behind(jobs: Sequence[Job], rows: list[NewJob]) -> list[NewJob]:
    """The rows of one enqueue_many with each key's jobs beyond its declared limit written
    blocked, behind the key's first jobs, so that the claims never meet them. Otherwise a
    burst of one key's jobs comes to the claims all ready: each claim of a full key's job
    is refused, and the refused job blocked, then woken again, two more writes a job.

    A job blocked here is woken as one blocked by a claim is: the key's first jobs are
    written in the same transaction, so the ending of each of their attempts (or their
    claim's refusal, which blocks them in turn behind attempts that will end) comes after
    the commit and wakes the next. The call's options give every row one priority and one
    schedule, so the first in the order given are the best. The count is the class's
    declaration: an operator's higher override fills the key at its first ending, a lower
    one is the claim's to enforce, as always."""
    room: dict[tuple[str, str], int] = {}
    for index, (job, row) in enumerate(zip(jobs, rows, strict=True)):
        limit = concurrency_of(job)
        if limit is None or row.limit_key is None:
            continue
        key = (row.type, row.limit_key)
        left = room.get(key, limit.count)
        room[key] = left - 1
        if left <= 0:
            rows[index] = row._replace(blocked_on=CONCURRENCY)
    return rows


class LimitControls:
    """Mixed into the Queue."""

    backend: Backend
    # The limits this queue has written: each declaration once per queue.
    _declared: set[Declared]

    def _declare_limits(self, jobs: Sequence[Job], rows: Sequence[NewJob]) -> None:
        """Record the declared limit of every limited type among `rows`, before they are
        written, so that their claims find it."""
        found = undeclared(jobs, rows, self._declared)
        if found:
            self.backend.run(self.backend.declare_limits_steps(found))
            self._declared.update(found)

    def _limited_work(self, most: int) -> int:
        """Limited jobs ready and limited attempts in progress, each counted up to `most`:
        what a worker shares with its siblings (worker/key_share.py)."""
        return self.backend.limited_work(most)

    def set_limit(self, job_type: str, concurrency: int | None) -> None:
        """Override the concurrency limit of `job_type` at run time, on every node (None:
        back to what the job class declares). Claims read it as they run: a lowered limit
        lets no new attempt start beyond it, a raised one wakes the blocked jobs at once."""
        check_type_name(job_type)
        count = None if concurrency is None else check_count(concurrency, "concurrency")
        self.backend.retrying("set_limit", lambda: self.backend.override_limit(job_type, count))

    def set_rate(self, job_type: str, rate: tuple[int, float] | None) -> None:
        """Override the rate limit of `job_type` at run time, on every node, as (count, per
        seconds) (None: back to what the job class declares). Claims read it as they run."""
        check_type_name(job_type)
        count, per = (None, None) if rate is None else (check_count(rate[0]), check_per(rate[1]))
        self.backend.retrying(
            "set_limit", lambda: self.backend.override_limit(job_type, count, RATE, per)
        )

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
