"""Workflows on the queue's side: the parents a job is enqueued after, checked, and a
job's parents and dependents."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..backends.base import Backend
from ..backends.rows import ParentsLeft


def parents_of(after: Iterable[int] | None, unique_key: Any) -> tuple[int, ...]:
    """enqueue's `after`, checked: job ids, each once, in the order given."""
    if after is None:
        return ()
    if isinstance(after, int | str | bytes):
        raise TypeError(f"after= takes a list of job ids, got {after!r}; write after=[{after!r}]")
    parents = tuple(dict.fromkeys(after))
    for parent in parents:
        if not isinstance(parent, int) or isinstance(parent, bool):
            raise TypeError(f"after= takes job ids (int), got {parent!r}")
    if not parents:
        raise ValueError("after= is empty; leave it out to enqueue a job that waits for none")
    if unique_key is not None:
        raise ValueError(
            "after= and unique_key cannot be combined: a key held by another job would give "
            "that job's id, and its parents are not these"
        )
    return parents


class WorkflowReads:
    """What the queue tells of a job's place in a workflow."""

    backend: Backend

    def parents(self, job_id: int) -> tuple[int, ...]:
        """The ids of the jobs `job_id` was enqueued after (its record: Queue.get)."""
        return self.backend.parents(job_id)

    def dependents(self, job_id: int) -> tuple[int, ...]:
        """The ids of the jobs enqueued after `job_id`."""
        return self.backend.dependents(job_id)

    def parents_left(self, job_id: int) -> ParentsLeft:
        """The parents the job would wait for if it were retried now (a `then` job: the
        members not yet ended), and those of them that ended badly, which refuse its retry
        until they are retried themselves."""
        return self.backend.parents_left(job_id)
