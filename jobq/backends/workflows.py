"""Workflows as every backend provides them: a job stored waiting for its parents, and the
reads of a job's parents and dependents. Each backend's schema holds the triggers that
release, cancel or revive dependents as their parents end (see `<db>/workflows.py`)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar, TypeVar

from ..records import Status
from .rows import NewJob
from .steps import Steps, count, every

T = TypeVar("T")

ENDINGS = "'completed', 'failed', 'expired', 'cancelled'"
BAD_ENDINGS = "'failed', 'expired', 'cancelled'"
BAD = frozenset((Status.FAILED, Status.EXPIRED, Status.CANCELLED))

# Dependency edges written by one statement: a bound on its parameters.
EDGES_A_STATEMENT = 400


class Workflows:
    placeholder: ClassVar[str]
    # What locks the parents' rows a dependent's enqueue reads, until it commits: a parent's
    # ending then waits for the edges to exist, and its trigger sees them.
    lock_rows: ClassVar[str]

    @abstractmethod
    def run(self, steps: Steps[T], connection: Any = None) -> T: ...

    @abstractmethod
    def add_many_steps(self, jobs: Sequence[NewJob]) -> Steps[list[int]]: ...

    connection: Any

    @abstractmethod
    def execute(self, sql: str, params: Any = None, connection: Any = None) -> int: ...

    @abstractmethod
    def fetchall(self, sql: str, params: Any = None) -> list[Any]: ...

    @abstractmethod
    def run_together(self, steps: Steps[T], connection: Any) -> T: ...

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]: ...

    def add_after(
        self, jobs: Sequence[NewJob], parents: Sequence[int], connection: Any = None
    ) -> list[int]:
        """add_after_steps(), on `connection` in its transaction, or else in a transaction of
        this backend's own."""
        if connection is not None:
            return self.run_together(self.add_after_steps(jobs, parents), connection)
        with self.transaction():
            return self.run(self.add_after_steps(jobs, parents))

    def apply_endings(self) -> None:
        """Apply the parents' endings a database records for later, in the transaction open
        (MySQL's, see mysql/workflows.py); elsewhere the triggers applied them already."""

    def marks(self, name: str, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
        names = [f"{name}{i}" for i in range(len(values))]
        params = dict(zip(names, values, strict=True))
        return ", ".join(self.placeholder.format(each) for each in names), params

    def add_after_steps(self, jobs: Sequence[NewJob], parents: Sequence[int]) -> Steps[list[int]]:
        """Insert the jobs, each a dependent of every one of `parents`: waiting while any
        parent has yet to complete, else pending. A parent that does not exist or ended
        badly is refused before anything is written."""
        marks, params = self.marks("parent", parents)
        rows = yield from every(
            f"SELECT id, status FROM jobq_jobs WHERE id IN ({marks}){self.lock_rows}", params
        )
        found = {int(job_id): Status(status) for job_id, status in rows}
        check_parents(parents, found)
        ids = yield from self.add_many_steps(jobs)
        unfinished = sum(status is not Status.COMPLETED for status in found.values())
        step = max(1, EDGES_A_STATEMENT // len(parents))
        for start in range(0, len(ids), step):
            children = ids[start : start + step]
            yield from self.edges_steps(children, parents)
            if unfinished:
                marks, params = self.marks("child", children)
                yield from count(
                    f"UPDATE jobq_jobs SET status = 'waiting', waiting_for = "
                    f"{self.placeholder.format('unfinished')} WHERE id IN ({marks})",
                    params | {"unfinished": unfinished},
                )
        return ids

    def edges_steps(self, children: Sequence[int], parents: Sequence[int]) -> Steps[int]:
        mark = self.placeholder.format
        params: dict[str, int] = {}
        values = []
        for i, child in enumerate(children):
            for j, parent in enumerate(parents):
                params[f"c{i}_{j}"], params[f"p{i}_{j}"] = child, parent
                values.append(f"({mark(f'p{i}_{j}')}, {mark(f'c{i}_{j}')})")
        sql = f"INSERT INTO jobq_dependencies (parent, child) VALUES {', '.join(values)}"
        return (yield from count(sql, params))

    def parents(self, job_id: int) -> tuple[int, ...]:
        """The ids of the jobs `job_id` was enqueued after, in id order."""
        return self.related("SELECT parent FROM jobq_dependencies WHERE child = {id}", job_id)

    def dependents(self, job_id: int) -> tuple[int, ...]:
        """The ids of the jobs enqueued after `job_id`, in id order."""
        return self.related("SELECT child FROM jobq_dependencies WHERE parent = {id}", job_id)

    def related(self, sql: str, job_id: int) -> tuple[int, ...]:
        statement = sql.format(id=self.placeholder.format("id")) + " ORDER BY 1"
        rows = self.run(every(statement, {"id": job_id}))
        return tuple(int(row[0]) for row in rows)


def check_parents(parents: Sequence[int], found: dict[int, Status]) -> None:
    missing = [parent for parent in parents if parent not in found]
    if missing:
        raise ValueError(f"after=: no job has id {missing[0]}; enqueue a job after jobs that exist")
    bad = [parent for parent in parents if found[parent] in BAD]
    if bad:
        raise ValueError(
            f"after=: job {bad[0]} already ended {found[bad[0]]}; retry it first "
            "(jobq retry ID), or leave it out"
        )
