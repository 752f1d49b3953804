"""An operator's controls, as the Queue offers them: list jobs, cancel, retry, pause.

The rules live here, the statements in each backend (backends/controls.py). Bad input to a
control that acts on one job (an id that is no id, an unknown id, a job in the wrong state)
gives False, never an exception, so that a script can act on a list of ids and count; what
went wrong is told by why_not_retried() and the CLI. Input that can only be a programming
error (a status that does not exist, a negative limit) raises ValueError naming it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from ..backends.base import Backend
from ..backends.controls import RETRYABLE
from ..job import check_type_name
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
    return backend.jobs(chosen, job_type, limit, before_id)


def cancel(backend: Backend, job_id: int) -> bool:
    return is_id(job_id) and backend.retrying("cancel", lambda: backend.cancel(job_id))


def retry(backend: Backend, job_id: int) -> bool:
    return is_id(job_id) and backend.retrying("retry", lambda: backend.retry(job_id))


def why_not_retried(job_id: object, record: JobRecord | None) -> str:
    """Why retry() refused this job, worded for a person, from its record read after."""
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
    return f"job {record.id} changed meanwhile; it is now {record.status}"


def pause(backend: Backend, job_type: str) -> bool:
    check_type_name(job_type)
    return backend.retrying("pause", lambda: backend.pause(job_type))


def resume(backend: Backend, job_type: str) -> bool:
    check_type_name(job_type)
    return backend.retrying("resume", lambda: backend.resume(job_type))
