"""Jobs for jobq.gather()'s tests: a parent that gathers children, each of which notes its
run in a journal (step_jobs.note) and returns ten times its number, or fails."""

from __future__ import annotations

from typing import Any

import jobq
from tests.support.step_jobs import note

ONCE = jobq.RetryPolicy(max_attempts=1)


class Child(jobq.Job):
    job_name = "gather.Child"
    type = "gather"
    retry = ONCE

    def __init__(self, journal: str, n: int, fail: bool = False) -> None:
        self.journal = journal
        self.n = n
        self.fail = fail

    def handle(self) -> int:
        note(self.journal, event="child", n=self.n)
        if self.fail:
            raise ValueError(f"child {self.n} fails")
        return self.n * 10


class Parent(jobq.Job):
    """Gathers a child for each number (those in `failing` fail); returns their results,
    or, when some failed, what jobq.GatherFailed carried."""

    job_name = "gather.Parent"
    type = "gather"

    def __init__(self, journal: str, numbers: list[int], failing: list[int] | None = None) -> None:
        self.journal = journal
        self.numbers = numbers
        self.failing = failing or []

    def children(self) -> list[Child]:
        return [Child(self.journal, n, n in self.failing) for n in self.numbers]

    def handle(self) -> Any:
        note(self.journal, event="parent")
        try:
            return jobq.gather(*self.children())
        except jobq.GatherFailed as failed:
            failures = [[f.job_id, f.status, "ValueError" in f.error] for f in failed.failures]
            return {"failures": failures, "results": failed.results}


class AsyncParent(Parent):
    job_name = "gather.AsyncParent"

    async def handle(self) -> Any:
        note(self.journal, event="parent")
        return await jobq.agather(*self.children())
