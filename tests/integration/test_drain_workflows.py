"""jobq.testing.drain() on workflows and batches, on each database: a job enqueued with
after= runs once its parents have completed, a batch's `then` job once every member has
ended, in one drain (with_recursion, the default) or left pending for the next one (without),
on a Queue and, awaited, on an AsyncQueue."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import jobq
from jobq.testing import async_queue, drain
from jobq.testing import queue as throwaway

# The steps in the order they ran, each test's own.
RAN: list[str] = []
# Higher than any parent's: a drain that ran a job before it was released would run it first.
EAGER = 100


class Step(jobq.Job):
    type = "step"

    def __init__(self, name: str, fails: bool = False) -> None:
        self.name = name
        self.fails = fails

    def handle(self) -> str:
        RAN.append(self.name)
        if self.fails:
            raise ValueError(f"{self.name} breaks")
        return self.name


class AsyncStep(Step):
    async def handle(self) -> str:  # type: ignore[override]
        await asyncio.sleep(0)
        return super().handle()


class Report(jobq.Job):
    type = "report"

    def __init__(self, queue_dsn: str) -> None:
        self.queue_dsn = queue_dsn

    def handle(self) -> dict[str, int]:
        claim = jobq.current_claim()
        assert claim is not None
        RAN.append("report")
        with jobq.Queue.connect(self.queue_dsn) as queue:
            counts = queue.batch_status(claim.id)
        return {status: n for status, n in counts.items() if n}


@pytest.fixture(autouse=True)
def journal() -> None:
    RAN.clear()


def diamond(queue: jobq.Queue) -> dict[str, int]:
    """a, then b and c after a, then d after b and c; the dependents the eagerest."""
    a = queue.enqueue(Step("a"))
    b, c = (queue.enqueue(Step(name), after=[a], priority=EAGER) for name in "bc")
    d = queue.enqueue(Step("d"), after=[b, c], priority=EAGER)
    return {"a": a, "b": b, "c": c, "d": d}


def test_drain_runs_a_workflow_in_its_order(dsn: str) -> None:
    with throwaway(dsn) as queue:
        ids = diamond(queue)
        drained = drain(queue)
        assert (drained.completed, drained.failed) == (4, 0)
        assert (RAN[0], sorted(RAN[1:3]), RAN[3]) == ("a", ["b", "c"], "d"), RAN
        assert drained.results == {job_id: name for name, job_id in ids.items()}


def test_without_recursion_a_released_dependent_is_left_for_the_next_drain(dsn: str) -> None:
    with throwaway(dsn) as queue:
        ids = diamond(queue)
        assert drain(queue, with_recursion=False).results == {ids["a"]: "a"}
        assert {queue.get(ids[n]).status for n in "bc"} == {"pending"}  # type: ignore[union-attr]
        assert queue.get(ids["d"]).status == "waiting"  # type: ignore[union-attr]
        assert sorted(drain(queue, with_recursion=False).results.values()) == ["b", "c"]
        assert drain(queue).results == {ids["d"]: "d"}
        assert RAN[-1] == "d"


def test_a_failed_parent_leaves_its_dependent_unrun(dsn: str) -> None:
    with throwaway(dsn) as queue:
        parent = queue.enqueue(Step("parent", fails=True), retry=jobq.RetryPolicy(max_attempts=1))
        child = queue.enqueue(Step("child"), after=[parent])
        drained = drain(queue, with_scheduled=True)
        assert (drained.completed, drained.failed) == (0, 1)
        assert "parent breaks" in drained.errors[parent]
        assert RAN == ["parent"]
        assert queue.get(child).status == "cancelled"  # type: ignore[union-attr]


def batch_of_three(queue: jobq.Queue, dsn: str) -> int:
    """Three parts, the last failing once and for all, and a report after them."""
    with queue.batch(then=Report(dsn)) as batch:
        for name in ("part 1", "part 2"):
            batch.enqueue(Step(name))
        batch.enqueue(Step("part 3", fails=True), retry=jobq.RetryPolicy(max_attempts=1))
    return batch.id


def test_drain_runs_a_batchs_then_job_after_every_member(dsn: str) -> None:
    with throwaway(dsn) as queue:
        report = batch_of_three(queue, dsn)
        drained = drain(queue)
        assert (drained.completed, drained.failed) == (3, 1)
        assert (sorted(RAN[:3]), RAN[3:]) == (["part 1", "part 2", "part 3"], ["report"]), RAN
        assert drained.results[report] == {"completed": 2, "failed": 1}


def test_without_recursion_a_released_then_job_is_left_pending(dsn: str) -> None:
    with throwaway(dsn) as queue:
        report = batch_of_three(queue, dsn)
        drained = drain(queue, with_recursion=False)
        assert (drained.completed, drained.failed) == (2, 1)
        assert queue.get(report).status == "pending"  # type: ignore[union-attr]
        assert drain(queue, "report").results == {report: {"completed": 2, "failed": 1}}


def test_await_drain_runs_an_async_workflow_in_its_order(dsn: str) -> None:
    async def scenario() -> tuple[dict[str, int], Any]:
        async with async_queue(dsn) as queue:
            a = await queue.enqueue(AsyncStep("a"))
            b = await queue.enqueue(Step("b"), after=[a], priority=EAGER)
            c = await queue.enqueue(AsyncStep("c"), after=[b], priority=EAGER)
            first = await drain(queue, with_recursion=False)
            assert first.results == {a: "a"}
            return {"a": a, "b": b, "c": c}, await drain(queue)

    ids, rest = asyncio.run(scenario())
    assert RAN == ["a", "b", "c"]
    assert rest.results == {ids["b"]: "b", ids["c"]: "c"}
