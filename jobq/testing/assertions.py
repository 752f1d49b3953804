"""Assertions on what a test enqueued, as Oban.Testing's assert_enqueued: by Job class or type
name, and by payload fields, with failures that list what was enqueued instead. On an
AsyncQueue from jobq.testing.async_queue() (or the jobq_async_queue fixture) they read through
the Queue beside it, and are called without await, like pytest's own assertions."""

from __future__ import annotations

from typing import Any

from ..job import Job
from ..queue import Queue
from ..queue.asynchronous import AsyncQueue
from ..records import JobRecord, Status
from .queues import companion

# Enqueued and not yet run: what these assertions look at.
WAITING = (Status.PENDING, Status.WAITING)
# The most jobs a failure message lists.
LISTED = 20


Kind = type[Job] | str | None


def enqueued(queue: Queue | AsyncQueue, kind: Kind = None, **fields: Any) -> list[JobRecord]:
    """The pending and waiting jobs of `kind` (a Job class, or a type name; None: any) whose
    payload has each of `fields` with that value, oldest first."""
    reader = sync(queue)
    return [record for record in waiting(reader) if matches(reader, record, kind, fields)]


def assert_enqueued(queue: Queue | AsyncQueue, kind: Kind = None, **fields: Any) -> JobRecord:
    """The first job enqueued() finds; AssertionError listing what was enqueued if none."""
    found = enqueued(queue, kind, **fields)
    if not found:
        raise AssertionError(f"no {wanted(kind, fields)} was enqueued; {listing(sync(queue))}")
    return found[0]


def refute_enqueued(queue: Queue | AsyncQueue, kind: Kind = None, **fields: Any) -> None:
    """AssertionError naming the jobs found, if enqueued() finds any."""
    found = enqueued(queue, kind, **fields)
    if found:
        shown = "; ".join(describe(record) for record in found[:LISTED])
        raise AssertionError(f"expected no {wanted(kind, fields)} enqueued, found: {shown}")


def sync(queue: Queue | AsyncQueue) -> Queue:
    """The Queue to read: an AsyncQueue's own reads are coroutines."""
    return companion(queue) if isinstance(queue, AsyncQueue) else queue


def waiting(queue: Queue) -> list[JobRecord]:
    records = [record for status in WAITING for record in queue.jobs(status, limit=10_000)]
    return sorted(records, key=lambda record: record.id)


def matches(queue: Queue, record: JobRecord, kind: Kind, fields: dict[str, Any]) -> bool:
    if isinstance(kind, str) and record.type != kind:
        return False
    if not fields and not isinstance(kind, type):
        return True
    payload = decoded(queue, record)
    if isinstance(kind, type) and not isinstance(payload, kind):
        return False
    return all(getattr(payload, name, object()) == value for name, value in fields.items())


def decoded(queue: Queue, record: JobRecord) -> Job | None:
    try:
        return queue.codec.decode(record.class_name, record.payload)
    except Exception:
        return None  # a class this test process cannot import matches no Job class


def wanted(kind: Kind, fields: dict[str, Any]) -> str:
    name = "job" if kind is None else kind if isinstance(kind, str) else kind.__name__
    given = ", ".join(f"{key}={value!r}" for key, value in fields.items())
    return f"{name}({given})" if given else name


def describe(record: JobRecord) -> str:
    return f"job {record.id} {record.class_name} (type {record.type}) {record.payload}"


def listing(queue: Queue) -> str:
    found = waiting(queue)
    if not found:
        return "nothing was enqueued"
    shown = "; ".join(describe(record) for record in found[:LISTED])
    more = f" and {len(found) - LISTED} more" if len(found) > LISTED else ""
    return f"enqueued instead: {shown}{more}"
