"""An operator's controls, as the Queue offers them: list jobs, cancel, retry, pause.

The rules live here, the statements in each backend (backends/controls.py). Bad input to a
control that acts on one job (an id that is no id, an unknown id, a job in the wrong state)
gives False, never an exception, so that a script can act on a list of ids and count; what
went wrong is told by why_not_retried() and the CLI. Input that can only be a programming
error (a status that does not exist, a negative limit) raises ValueError naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol

from ..backends.base import Backend
from ..backends.controls import RETRYABLE
from ..backends.rows import ParentsLeft
from ..backends.steps import Steps, done
from ..job import check_type_name, registered_types
from ..records import JobRecord, Status

MAX_PRIORITY = 1000
# Ids are 64-bit signed in every database: a larger number is no job's.
MAX_ID = 2**63 - 1
MAX_LIMIT = 10_000


def checked_priority(priority: object) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError(f"priority must be an int from -1000 to 1000, got {priority!r}")
    if not -MAX_PRIORITY <= priority <= MAX_PRIORITY:
        raise ValueError(f"priority must be from -1000 to 1000, got {priority}")
    return priority


def is_id(job_id: object) -> bool:
    return isinstance(job_id, int) and not isinstance(job_id, bool) and 0 < job_id <= MAX_ID


def jobs(
    backend: Backend,
    status: Status | str | None,
    job_type: str | None,
    limit: int,
    before_id: int | None,
) -> list[JobRecord]:
    return backend.run(jobs_steps(backend, status, job_type, limit, before_id))


def jobs_steps(
    backend: Backend,
    status: Status | str | None,
    job_type: str | None,
    limit: int,
    before_id: int | None,
) -> Steps[list[JobRecord]]:
    """The listing, its arguments checked when it is made (before any statement runs)."""
    chosen = None
    if status is not None:
        if status not in set(Status):
            names = ", ".join(map(str, Status))
            raise ValueError(f"status must be one of {names}, got {status!r}")
        chosen = Status(status)
    if job_type is not None:
        check_type_name(job_type)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_LIMIT:
        raise ValueError(f"limit must be a whole number from 1 to {MAX_LIMIT}, got {limit!r}")
    if before_id is not None and not is_id(before_id):
        raise ValueError(f"before_id must be a job id (a positive int), got {before_id!r}")
    return backend.jobs_steps(chosen, job_type, limit, before_id)


# Each control is made as its statements (see backends/steps.py), its input checked as it is
# made; Queue runs them here, AsyncQueue on its async driver.


def cancel(backend: Backend, job_id: int) -> bool:
    return backend.retrying("cancel", lambda: backend.run(cancel_steps(backend, job_id)))


def cancel_steps(backend: Backend, job_id: int) -> Steps[bool]:
    return backend.cancel_steps(job_id) if is_id(job_id) else done(False)


def retry(backend: Backend, job_id: int) -> bool:
    if (target := backend.open_application_transaction()) is not None:
        return backend.run(retry_steps(backend, job_id), target)
    return backend.retrying(
        "retry", lambda: backend.in_one(retry_steps(backend, job_id), connection=None)
    )


def retry_many(backend: Backend, ids: Sequence[int]) -> set[int]:
    """Retry each of these jobs, by retry()'s rules, in one transaction; the ids retried."""
    return backend.retrying("retry", lambda: backend.in_one(each(retry_steps, backend, ids), None))


def cancel_many(backend: Backend, ids: Sequence[int]) -> set[int]:
    """Cancel each of these jobs, by cancel()'s rules, in one transaction; the ids cancelled."""
    return backend.retrying(
        "cancel", lambda: backend.in_one(each(cancel_steps, backend, ids), None)
    )


def each(
    control: Callable[[Backend, int], Steps[bool]], backend: Backend, ids: Sequence[int]
) -> Steps[set[int]]:
    """One control's statements for each job in turn; the ids it acted on."""
    acted: set[int] = set()
    for job_id in ids:
        if (yield from control(backend, job_id)):
            acted.add(job_id)
    return acted


def retry_steps(backend: Backend, job_id: int) -> Steps[bool]:
    """The retry's statements, to run in one transaction (a job of a workflow waits again
    for its parents: see Workflows.retry_after_parents_steps)."""
    return backend.retry_after_parents_steps(job_id) if is_id(job_id) else done(False)


class Holders(Protocol):
    """What why_not_retried() asks of a queue to name the job holding a unique key, or the
    parent that ended badly."""

    def unique_holder(self, key: str) -> int | None: ...
    def parents_left(self, job_id: int) -> ParentsLeft: ...


def why_not_retried(job_id: object, record: JobRecord | None, queue: Holders | None = None) -> str:
    """Why retry() refused this job, worded for a person, from its record read after; with
    the queue, a job refused for its unique key is told which job holds that key."""
    if not is_id(job_id) or record is None:
        return f"no job with id {job_id!r}"
    if record.status not in RETRYABLE:
        names = ", ".join(map(str, RETRYABLE))
        return f"job {record.id} is {record.status}; only {names} jobs can be retried"
    if record.deadline is not None and record.deadline <= datetime.now(UTC):
        return (
            f"job {record.id}'s deadline passed at {record.deadline.isoformat()}: "
            "it could never run again"
        )
    if queue is not None and (bad := queue.parents_left(record.id).ended_badly):
        return parent_ended_badly(record.id, *bad[0])
    key = record.unique_key
    if key is not None:
        holder = None if queue is None else queue.unique_holder(key)
        if queue is None or holder is not None:
            who = "another active job" if holder is None else f"job {holder}"
            return f"{who} holds its unique key {key!r}; retry it once that job has ended"
    return f"job {record.id} changed meanwhile; it is now {record.status}"


def parent_ended_badly(job_id: int, parent: int, ended: Status) -> str:
    return (
        f"job {job_id} waits for job {parent}, which ended {ended}; retry job {parent} first "
        "(the dependents its ending cancelled come back with it)"
    )


def on_retry(record: JobRecord, left: ParentsLeft) -> str | None:
    """What a retry of this job would do, told where it may be retried (`jobq show`, the
    status page): None for a job that cannot be retried or waits for no other."""
    if record.status not in RETRYABLE or not (left.unfinished or left.ended_badly):
        return None
    if left.ended_badly:
        return "refused: " + parent_ended_badly(record.id, *left.ended_badly[0])
    return "waits again for job(s) " + ", ".join(map(str, left.unfinished))


def pause(backend: Backend, job_type: str) -> bool:
    return backend.retrying("pause", lambda: backend.run(pause_steps(backend, job_type)))


def pause_steps(backend: Backend, job_type: str) -> Steps[bool]:
    check_type_name(job_type)
    return backend.pause_steps(job_type)


def knows_type(backend: Backend, job_type: str) -> bool:
    return backend.run(knows_type_steps(backend, job_type))


def knows_type_steps(backend: Backend, job_type: str) -> Steps[bool]:
    listing = jobs_steps(backend, None, job_type, 1, None)
    if job_type in registered_types() or (yield from listing):
        return True
    return job_type in (yield from backend.paused_steps())


def resume(backend: Backend, job_type: str) -> bool:
    return backend.retrying("resume", lambda: backend.run(resume_steps(backend, job_type)))


def resume_steps(backend: Backend, job_type: str) -> Steps[bool]:
    check_type_name(job_type)
    return backend.resume_steps(job_type)
