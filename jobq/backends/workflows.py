"""Workflows as every backend provides them: a job stored waiting for its parents, and the
reads of a job's parents and dependents. Each backend's schema holds the triggers that
release, cancel or revive dependents as their parents end (see `<db>/workflows.py`)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar, TypeVar

from ..records import JobRecord, Status
from .rows import NewJob, ParentsLeft
from .steps import Steps, count, every, value

T = TypeVar("T")

ENDINGS = "'completed', 'failed', 'expired', 'cancelled'"
BAD_ENDINGS = "'failed', 'expired', 'cancelled'"


# What pruning keeps of the finished jobs it would delete (on jobq_jobs, unaliased), for as
# long as another job needs them:
# - a parent, until each job enqueued after it (after=) has ended: that job reads its
#   parents' results while it runs (current_claim().parents);
# - a batch's member, until the batch's `then` job has ended: `then` reads its members'
#   counts (Queue.batch_status); members are the `then` job's parents with any_ending;
# - a job cancelled because a parent ended badly, while that parent is kept: retrying the
#   parent brings it back (the revive trigger finds it by its edge).
# Unique keys need nothing kept: a key binds pending and running jobs only, never a finished
# one, so pruning one changes nothing a key admits.
def kept(per_row: str = "") -> str:
    """KEPT, each subquery ended by `per_row`: PostgreSQL's OFFSET 0, so that its planner
    probes them row by row, by primary key, for the rows a prune batch walks, rather than
    read every edge and every unfinished job (or every job id) into hash tables beside them,
    which it does for a few thousand rows, and which breaks the walk's order."""
    return f"""NOT EXISTS (SELECT 1 FROM jobq_dependencies kept_d
        JOIN jobq_jobs kept_c ON kept_c.id = kept_d.child
        WHERE kept_d.parent = jobq_jobs.id AND kept_c.status NOT IN ({ENDINGS}){per_row})
    AND (jobq_jobs.cancelled_by IS NULL OR NOT EXISTS (
        SELECT 1 FROM jobq_jobs kept_p WHERE kept_p.id = jobq_jobs.cancelled_by{per_row}))"""


KEPT = kept()
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
        return self.in_one(self.add_after_steps(jobs, parents), connection)

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

    def edges_steps(
        self, children: Sequence[int], parents: Sequence[int], any_ending: bool = False
    ) -> Steps[int]:
        """Every child after every parent: counted down by the parent's completion, or with
        `any_ending` (a batch's `then` after its members) by any ending of it."""
        mark = self.placeholder.format
        params: dict[str, Any] = {"any": any_ending}
        values = []
        for i, child in enumerate(children):
            for j, parent in enumerate(parents):
                params[f"c{i}_{j}"], params[f"p{i}_{j}"] = child, parent
                values.append(f"({mark(f'p{i}_{j}')}, {mark(f'c{i}_{j}')}, {mark('any')})")
        sql = (
            f"INSERT INTO jobq_dependencies (parent, child, any_ending) VALUES {', '.join(values)}"
        )
        return (yield from count(sql, params))

    # -- batches: members, and a `then` job that waits for every member's ending ----------

    def add_then(self, then: NewJob, connection: Any = None) -> int:
        """Store a batch's `then` job, waiting: for its members, and for the batch to be
        sealed (one count of its own), so that no member ending before the last is enqueued
        can release it. Its id is the batch's."""
        return self.in_one(self.add_then_steps(then), connection)

    def add_then_steps(self, then: NewJob) -> Steps[int]:
        (batch_id,) = yield from self.add_many_steps([then])
        mark = self.placeholder.format
        yield from count(
            f"UPDATE jobq_jobs SET status = 'waiting', waiting_for = 1 WHERE id = {mark('id')}",
            {"id": batch_id},
        )
        return batch_id

    def add_members(
        self, jobs: Sequence[NewJob], batch_id: int, connection: Any = None
    ) -> list[int]:
        """Store the jobs as members of the batch, in one transaction with the count its
        `then` job waits for."""
        return self.in_one(self.add_members_steps(jobs, batch_id), connection)

    def add_members_steps(self, jobs: Sequence[NewJob], batch_id: int) -> Steps[list[int]]:
        mark = self.placeholder.format
        # The `then` row first: members added to one batch on two connections queue up here.
        added = yield from count(
            f"UPDATE jobq_jobs SET waiting_for = waiting_for + {mark('n')} "
            f"WHERE id = {mark('batch')} AND status = 'waiting'",
            {"n": len(jobs), "batch": batch_id},
        )
        if added != 1:
            raise ValueError(f"batch {batch_id} is sealed or unknown; enqueue in its with block")
        ids = yield from self.add_many_steps(jobs)
        for start in range(0, len(ids), EDGES_A_STATEMENT):
            members = ids[start : start + EDGES_A_STATEMENT]
            marks, params = self.marks("member", members)
            yield from count(
                f"UPDATE jobq_jobs SET batch_id = {mark('batch')} WHERE id IN ({marks})",
                params | {"batch": batch_id},
            )
            yield from self.edges_steps([batch_id], members, any_ending=True)
        return ids

    def seal(self, batch_id: int, then_type: str, connection: Any = None) -> None:
        """No more members: the batch's own count goes, which releases its `then` job when
        every member has ended already (or it has none)."""
        self.in_one(self.seal_steps(batch_id, then_type), connection)

    def seal_steps(self, batch_id: int, then_type: str) -> Steps[None]:
        # The status first: MySQL assigns left to right, and it reads the count as it was.
        params = {"id": batch_id, "type": then_type, **self.wake_params}
        yield from count(
            "UPDATE jobq_jobs SET status = CASE WHEN status = 'waiting' AND waiting_for = 1 "
            "THEN 'pending' ELSE status END, waiting_for = waiting_for - 1 "
            f"WHERE id = {self.placeholder.format('id')}",
            params,
        )
        if self.sql_wake is not None:
            yield from every(self.sql_wake, params)

    # Wakes idle workers for a job of type %(type)s made ready; None where they poll.
    sql_wake: ClassVar[str | None] = None
    wake_params: ClassVar[Mapping[str, str]]

    def batch_counts(self, batch_id: int) -> dict[Status, int]:
        """The batch's members by status."""
        mark = self.placeholder.format
        sql = (
            f"SELECT status, count(*) FROM jobq_jobs WHERE batch_id = {mark('id')} GROUP BY status"
        )
        rows = self.run(every(sql, {"id": batch_id}))
        return {Status(status): int(n) for status, n in rows}

    def batch_jobs(self, batch_id: int, limit: int) -> list[JobRecord]:
        """Up to `limit` of the batch's members, newest first."""
        mark = self.placeholder.format
        sql = (
            f"SELECT id FROM jobq_jobs WHERE batch_id = {mark('id')} "
            f"ORDER BY id DESC LIMIT {mark('limit')}"
        )
        ids = [int(row[0]) for row in self.run(every(sql, {"id": batch_id, "limit": limit}))]
        if not ids:
            return []
        return [self.record(row) for row in self.run(every(*self.by_ids(ids)))]

    @abstractmethod
    def by_ids(self, ids: Sequence[int]) -> tuple[str, dict[str, Any]]: ...

    @abstractmethod
    def record(self, row: Sequence[Any]) -> JobRecord: ...

    sql_cancel: ClassVar[str]

    def cancel_batch(self, batch_id: int) -> int:
        """Cancel the batch's unfinished members as Controls.cancel cancels one job (those in
        progress are asked to stop); returns how many were pending, waiting or running."""
        mark = self.placeholder.format
        sql = self.sql_cancel.replace(f"WHERE id = {mark('id')}", f"WHERE batch_id = {mark('id')}")
        return self.run(count(sql, {"id": batch_id}))

    def in_one(self, steps: Steps[T], connection: Any) -> T:
        """The steps on `connection` in its transaction, or else in one of this backend's."""
        if connection is not None:
            return self.run_together(steps, connection)
        with self.transaction():
            return self.run(steps)

    # -- a retry of a job that waits for others ---------------------------------------------

    @abstractmethod
    def retry_steps(self, job_id: int) -> Steps[bool]: ...

    def retry_after_parents_steps(self, job_id: int) -> Steps[bool]:
        """Controls.retry_steps, for a job that may wait for others; in one transaction. It
        waits again for the parents that have not completed (a `then` job, for the members
        that have not ended), and is refused while a parent it was enqueued after has ended
        badly: that parent's retry brings it back. The parents are locked as an enqueue after
        them locks them, so that none ends between this count and the commit."""
        left = yield from self.parents_left_steps(job_id, lock=True)
        if left.ended_badly or not (yield from self.retry_steps(job_id)):
            return False
        mark = self.placeholder.format
        params = {"id": job_id}
        # The count the triggers kept is the larger where it holds what the parents do not
        # show: an open batch's own count, or (MySQL) an ending recorded but not yet applied.
        kept = yield from value(
            f"SELECT waiting_for FROM jobq_jobs WHERE id = {mark('id')}", params
        )
        waits = max(int(kept or 0), len(left.unfinished))
        if waits:
            yield from count(
                f"UPDATE jobq_jobs SET status = 'waiting', waiting_for = {mark('waits')} "
                f"WHERE id = {mark('id')} AND status = 'pending'",
                params | {"waits": waits},
            )
        return True

    def parents_left(self, job_id: int) -> ParentsLeft:
        return self.run(self.parents_left_steps(job_id))

    def parents_left_steps(self, job_id: int, lock: bool = False) -> Steps[ParentsLeft]:
        """The parents the job would wait for now, and those of them that ended badly."""
        mark = self.placeholder.format
        rows = yield from every(
            "SELECT p.id, p.status, d.any_ending FROM jobq_dependencies d "
            f"JOIN jobq_jobs p ON p.id = d.parent WHERE d.child = {mark('id')} ORDER BY p.id"
            + (self.lock_rows if lock else ""),
            {"id": job_id},
        )
        unfinished, ended_badly = [], []
        for parent, status, any_ending in rows:
            ended = Status(status)
            if ended is Status.COMPLETED or (any_ending and ended in BAD):
                continue  # a batch's member counts whatever its ending
            unfinished.append(int(parent))
            if ended in BAD:
                ended_badly.append((int(parent), ended))
        return ParentsLeft(tuple(unfinished), tuple(ended_badly))

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
