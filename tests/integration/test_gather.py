"""jobq.gather(): a job's children are enqueued once, the parent waits for them holding no
worker (a batch's `then` job wakes it), and gets their results in order, or
jobq.GatherFailed with the failures. On the three databases."""

from __future__ import annotations

from pathlib import Path

import pytest

import jobq
from tests.support.gather_jobs import AsyncParent, Parent
from tests.support.step_jobs import entries
from tests.support.waiting import wait_for


def ended(queue: jobq.Queue, job_id: int) -> jobq.JobRecord | None:
    """Run what is ready; the parent's record once it has ended."""
    queue.process_jobs(1)
    record = queue.get(job_id)
    assert record is not None
    return record if record.status in (jobq.Status.COMPLETED, jobq.Status.FAILED) else None


@pytest.mark.parametrize("kind", [Parent, AsyncParent])
def test_gather_enqueues_the_children_once_and_returns_their_results_in_order(
    queue: jobq.Queue, tmp_path: Path, kind: type[Parent]
) -> None:
    journal = tmp_path / "journal"
    job_id = queue.enqueue(kind(str(journal), [3, 1, 2]), retry=jobq.RetryPolicy(max_attempts=1))
    assert queue.process_jobs(1) == 1
    record = queue.get(job_id)
    assert record is not None
    assert record.status is not jobq.Status.COMPLETED
    assert "Suspended: waiting for 3 children" in (record.last_error or "")
    record = wait_for("the parent to end", lambda: ended(queue, job_id))
    assert record.status is jobq.Status.COMPLETED
    assert record.result == [30, 10, 20]
    assert queue.process_jobs(10) == 0  # nothing left over: no child enqueued twice
    runs = entries(journal)
    assert sorted(e["n"] for e in runs if e["event"] == "child") == [1, 2, 3]
    assert [e["attempt"] for e in runs if e["event"] == "parent"] == [1, 2]
    assert record.retry.max_attempts == 2  # the suspension was not counted
    names = sorted(step.name for step in queue.steps(job_id))
    assert names == ["jobq.gather-1", "jobq.gather-1.ended"]


def test_gather_raises_with_the_failures_and_the_others_results(
    queue: jobq.Queue, tmp_path: Path
) -> None:
    job_id = queue.enqueue(Parent(str(tmp_path / "journal"), [1, 2, 3], failing=[2]))
    record = wait_for("the parent to end", lambda: ended(queue, job_id))
    assert record.status is jobq.Status.COMPLETED
    (failure,) = record.result["failures"]
    assert failure[1:] == ["failed", True]
    assert queue.get(failure[0]) is not None
    assert record.result["results"] == [10, None, 30]


def test_a_replay_after_the_children_ended_returns_the_recorded_results(
    queue: jobq.Queue, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    job_id = queue.enqueue(Parent(str(journal), [1]))
    record = wait_for("the parent to end", lambda: ended(queue, job_id))
    assert record.result == [10]
    children = [s for s in queue.steps(job_id) if s.name == "jobq.gather-1"]
    assert len(children) == 1
    queue.retry(job_id)  # runs handle() again: both steps replay
    record = wait_for("the parent to end again", lambda: ended(queue, job_id))
    assert record.result == [10]
    assert len([e for e in entries(journal) if e["event"] == "child"]) == 1


def test_gather_refuses_no_children_and_works_only_in_a_job() -> None:
    with pytest.raises(RuntimeError, match=r"jobq.gather\(\) is for a job's handle"):
        jobq.gather()
