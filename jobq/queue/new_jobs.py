"""The row for a new job, checked as every enqueue checks it: its job, type, retry policy,
payload size, priority and key, and when it may run and until when."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..backends.rows import NewJob
from ..codec import Codec
from ..job import Job, check_runnable_elsewhere, check_type_name
from ..limits import concurrency_of, rate_of
from ..retry import MAX_DELAY, RetryPolicy
from .controls import checked_priority
from .unique_keys import check_unique_key

# Larger payloads are refused at enqueue: a queue row is no place for bulk data, and MySQL's
# default max_allowed_packet (16 MiB) would refuse the claim that reads it back.
MAX_PAYLOAD_BYTES = 8 * 2**20

# Shared by every job without a policy of its own: it is immutable, and making one per job
# was a measurable share of enqueue_many.
DEFAULT_RETRY = RetryPolicy()


def seconds_of(value: float | timedelta, what: str) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not math.isfinite(seconds) or seconds < 0 or seconds > MAX_DELAY:
        raise ValueError(f"{what} must be between 0 and {MAX_DELAY:.0f} seconds, got {value!r}")
    return seconds


def aware(value: datetime, what: str) -> datetime:
    if value.tzinfo is None:
        raise ValueError(f"{what} must be a timezone-aware datetime, got {value!r}")
    return value


@dataclass(frozen=True)
class Schedule:
    """When a job may run and until when, as enqueue's options give it, checked."""

    scheduled_at: datetime | None
    delay: float
    deadline: datetime | None
    deadline_in: float | None

    @classmethod
    def of(
        cls,
        delay: float | timedelta | None,
        scheduled_at: datetime | None,
        deadline: datetime | float | timedelta | None,
    ) -> Schedule:
        if delay is not None and scheduled_at is not None:
            raise ValueError("give either delay or scheduled_at, not both")
        absolute_deadline = relative_deadline = None
        if isinstance(deadline, datetime):
            absolute_deadline = aware(deadline, "deadline")
        elif deadline is not None:
            relative_deadline = seconds_of(deadline, "deadline")
        return cls(
            scheduled_at=None if scheduled_at is None else aware(scheduled_at, "scheduled_at"),
            delay=0.0 if delay is None else seconds_of(delay, "delay"),
            deadline=absolute_deadline,
            deadline_in=relative_deadline,
        )


@dataclass(frozen=True)
class Options:
    """The options enqueue and enqueue_many apply to every job they store."""

    type: str | None
    when: Schedule
    retry: RetryPolicy | None
    priority: int

    @classmethod
    def of(
        cls,
        type: str | None,
        when: Schedule,
        retry: RetryPolicy | None,
        priority: object,
    ) -> Options:
        return cls(type, when, retry, checked_priority(priority))


def new_jobs(
    codec: Codec, jobs: Sequence[Job], keys: Sequence[str | None], options: Options
) -> list[NewJob]:
    """The row of each job with its key, checked: every one before any is written."""
    return [new_job(codec, job, options, key) for job, key in zip(jobs, keys, strict=True)]


def traced(rows: list[NewJob], context: Mapping[str, str]) -> list[NewJob]:
    """The rows carrying the trace context of the enqueue that stores them (tracing.publishing),
    or the rows themselves when it has none."""
    if not context:
        return rows
    parent, state = context["traceparent"], context.get("tracestate")
    return [row._replace(traceparent=parent, tracestate=state) for row in rows]


def new_job(codec: Codec, job: Job, options: Options, unique_key: str | None = None) -> NewJob:
    """The row for one job, checked as every enqueue checks it."""
    if not isinstance(job, Job):
        raise TypeError(f"can only enqueue jobq.Job instances, got {job!r}")
    check_runnable_elsewhere(job.__class__)
    job_type = job.type if options.type is None else options.type
    check_type_name(job_type)
    policy = options.retry or job.retry or DEFAULT_RETRY
    if not isinstance(policy, RetryPolicy):
        raise TypeError(f"retry must be a jobq.RetryPolicy, got {policy!r}")
    limit = concurrency_of(job)
    rate = rate_of(job)
    class_name, payload = codec.encode(job)
    size = len(payload) if payload.isascii() else len(payload.encode("utf-8", "surrogatepass"))
    if size > MAX_PAYLOAD_BYTES:
        raise ValueError(
            f"{class_name}: payload of {size / 2**20:.1f} MiB is over jobq's limit of "
            f"{MAX_PAYLOAD_BYTES // 2**20} MiB; store large data elsewhere and enqueue a "
            "reference to it"
        )
    return NewJob(
        type=job_type,
        class_name=class_name,
        payload=payload,
        retry=policy,
        scheduled_at=options.when.scheduled_at,
        delay=options.when.delay,
        deadline=options.when.deadline,
        deadline_in=options.when.deadline_in,
        priority=options.priority,
        unique_key=check_unique_key(unique_key),
        limit_key=None if limit is None else limit.key_of(job),
        rate_key=None if rate is None else rate.key_of(job),
    )
