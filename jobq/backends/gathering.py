"""jobq.gather()'s writes: a job's children stored as a batch whose `then` job wakes it
(queue/gathering.py), in one transaction with the step that records their ids, so that a
crash between the two can neither lose the children nor enqueue them twice."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar, TypeVar

from ..records import JobRecord
from .rows import NewJob
from .steps import Steps

T = TypeVar("T")


class Fenced(Exception):
    """The attempt lost its job before the step committed: roll the children back."""


class Gathering:
    sql_record_step: ClassVar[str]

    @abstractmethod
    def add_then_steps(self, then: NewJob) -> Steps[int]: ...

    @abstractmethod
    def add_members_steps(self, jobs: Sequence[NewJob], batch_id: int) -> Steps[list[int]]: ...

    @abstractmethod
    def seal_steps(self, batch_id: int, then_type: str) -> Steps[None]: ...

    @abstractmethod
    def run(self, steps: Steps[T], connection: Any = None) -> T: ...

    @abstractmethod
    def execute(self, sql: str, params: Any = None, connection: Any = None) -> int: ...

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]: ...

    @abstractmethod
    def get(self, job_id: int) -> JobRecord | None: ...

    def add_children(
        self,
        job_id: int,
        token: str,
        name: str,
        then: NewJob,
        children: Sequence[NewJob],
        encode: Callable[[list[int]], str],
    ) -> list[int] | None:
        """As the attempt (job_id, token): store `children` as a batch whose `then` job is
        `then`, and record the step `name` (their ids, as `encode` gives them) in the same
        transaction. None when the attempt no longer holds the job: nothing is stored."""
        try:
            with self.transaction():
                batch = self.run(self.add_then_steps(then))
                ids = self.run(self.add_members_steps(children, batch))
                self.run(self.seal_steps(batch, then.type))
                value = encode(ids)
                size = len(value.encode("utf-8", "surrogatepass"))
                params = {"id": job_id, "token": token, "name": name, "value": value}
                if self.execute(self.sql_record_step, {**params, "size": size}) != 1:
                    raise Fenced
        except Fenced:
            return None
        return ids

    def children(self, ids: Sequence[int]) -> list[JobRecord | None]:
        """The children's rows, as stored (results encoded), in the order of `ids`."""
        return [self.get(each) for each in ids]
