"""Actions on many jobs at once: the jobs ticked on a page, or every job a filter matches.

Every job is acted on by the Queue's own controls (retry_many, cancel_many, delete_ended),
a batch in one transaction, so a bulk action keeps each job's rules: a job whose unique key
another holds is not retried, a running one is cancelled by stopping its attempt, and a job
another still needs is not deleted.
Every match of a filter is found a batch at a time, each batch one bounded search
(backends/search.py), so no statement reads or locks more than a batch's worth.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial

from ..queue import Queue
from ..queue.controls import why_not_retried
from ..records import JobFilter

# Jobs acted on between two searches for more matches.
BATCH = 500
# Skipped jobs whose reason the notice gives; the rest are counted.
REASONS_SHOWN = 3
PAST = {"retry": "retried", "cancel": "cancelled", "delete": "deleted"}


@dataclass
class Tally:
    """What one bulk action did, so far."""

    action: str
    done: int = 0
    skipped: int = 0
    reasons: list[str] = field(default_factory=list)

    def skip(self, reason: Callable[[], str]) -> None:
        """Count one job skipped; say why for the first REASONS_SHOWN (a reason may cost a
        query or two, which thousands of skipped jobs should not)."""
        self.skipped += 1
        if len(self.reasons) < REASONS_SHOWN:
            self.reasons.append(reason())

    def notice(self) -> str:
        text = f"{PAST[self.action].capitalize()} {self.done:,} job{'' if self.done == 1 else 's'}"
        if self.skipped:
            text += f"; {self.skipped:,} skipped: " + "; ".join(self.reasons)
            if self.skipped > len(self.reasons):
                text += f"; and {self.skipped - len(self.reasons):,} more"
        return text + "."


def matches(queue: Queue, wanted: JobFilter) -> Iterator[list[int]]:
    """The ids of every job that matches, newest first, a batch at a time."""
    before: int | None = None
    while True:
        found = queue.search(wanted, limit=BATCH, before_id=before)
        if found.records:
            yield [record.id for record in found.records]
        if found.following is None:
            return
        before = found.following


def act(queue: Queue, tally: Tally, ids: Sequence[int]) -> None:
    """Apply the tally's action to these jobs, counting what was done and skipped."""
    if tally.action == "delete":
        deleted = queue.delete_ended(ids)
        tally.done += deleted
        left = [job_id for job_id in ids if queue.get(job_id) is not None]
        for job_id in left[: REASONS_SHOWN - len(tally.reasons)]:
            tally.reasons.append(not_deleted(queue, job_id))
        tally.skipped += len(ids) - deleted
        return
    many = queue.retry_many if tally.action == "retry" else queue.cancel_many
    why = not_retried if tally.action == "retry" else not_cancelled
    acted = many(ids)
    tally.done += len(acted)
    for job_id in ids:
        if job_id not in acted:
            tally.skip(partial(why, queue, job_id))


def not_retried(queue: Queue, job_id: int) -> str:
    return why_not_retried(job_id, queue.get(job_id), queue)


def not_cancelled(queue: Queue, job_id: int) -> str:
    record = queue.get(job_id)
    return f"no job {job_id}" if record is None else f"job {job_id} is {record.status}"


def not_deleted(queue: Queue, job_id: int) -> str:
    record = queue.get(job_id)
    if record is None:
        return f"no job {job_id}"
    if record.finished_at is None:
        return f"job {job_id} is {record.status}, not ended"
    return f"job {job_id} is kept: another job still needs it"
