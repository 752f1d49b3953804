"""Batches of jobs with a `then` job, on the queue's side (not batched claims: see
batched.py). A batch is its `then` job waiting for every member's ending, whatever it is
(see backends/workflows.py), plus one count of its own that the end of the with block
removes, so that no member ending early can release it before the last is enqueued."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from ..backends.base import Backend
from ..backends.rows import NewJob
from ..codec import Codec
from ..job import Job
from .new_jobs import Options, Schedule, new_jobs
from .producing import OWN_CONNECTION, Producing

T = TypeVar("T")
Add = Callable[[list[NewJob], Any], list[int]]


class Queue(Protocol):
    """What a batch asks of its jobq.Queue: its backend and codec, and its writes."""

    backend: Backend
    codec: Codec

    def _declare_limits(self, jobs: Sequence[Job], rows: Sequence[NewJob]) -> None: ...
    def _publish(self, what: str, connection: Any, rows: list[NewJob], add: Add) -> list[int]: ...
    def _write(self, what: str, connection: Any, write: Callable[[Any], T]) -> T: ...


# A `then` job runs as soon as it is released: no delay, no deadline of its own.
NOW = Schedule(scheduled_at=None, delay=0.0, deadline=None, deadline_in=None)


def then_row(queue: Queue, then: Job) -> NewJob:
    """The row of a batch's `then` job, checked as enqueue() checks a job."""
    (row,) = new_jobs(queue.codec, [then], [None], Options.of(None, NOW, None, 0))
    queue._declare_limits([then], [row])
    return row


class Batch(Producing[int, list[int]]):
    """The members of one batch, enqueued in a `with queue.batch(then=...)` block: each as
    enqueue() stores a job, and counted by the batch's `then` job, which runs once every
    member has ended, however it ended. `id` is the batch's (its `then` job's id)."""

    def __init__(self, queue: Queue, then: NewJob, connection: Any) -> None:
        self.queue = queue
        self.codec = queue.codec
        self.then = then
        self.connection = connection
        self.id = queue._publish(
            "batch", connection, [then], lambda rows, to: [queue.backend.add_then(rows[0], to)]
        )[0]

    def __enter__(self) -> Batch:
        return self

    def __exit__(self, *exc: object) -> None:
        # Sealed even when the block raised: members already stored (on jobq's connection,
        # committed) still run, and `then` must follow them rather than wait for good.
        backend = self.queue.backend
        self.queue._write(
            "batch", self.connection, lambda to: backend.seal(self.id, self.then.type, to)
        )

    def _declare_limits(self, jobs: Sequence[Job], rows: Sequence[NewJob]) -> None:
        self.queue._declare_limits(jobs, rows)

    def _add(self, row: NewJob, connection: Any, parents: tuple[int, ...]) -> int:
        return self._add_many([row], connection, parents)[0]

    def _add_many(self, rows: list[NewJob], connection: Any, parents: tuple[int, ...]) -> list[int]:
        if parents:
            raise ValueError("a batch member cannot also wait for other jobs (after=)")
        if any(row.unique_key is not None for row in rows):
            # As after= refuses it: the batch counts each member it writes.
            raise ValueError(
                "a batch member cannot have a unique_key: a key another job holds would give "
                "that job's id, which is not this batch's; leave unique_key out"
            )
        if connection is not OWN_CONNECTION and connection is not self.connection:
            raise ValueError("a batch's members are written on the batch's connection=")
        backend, batch_id = self.queue.backend, self.id
        return self.queue._publish(
            "batch",
            self.connection,
            rows,
            lambda jobs, to: backend.add_members(jobs, batch_id, to),
        )
