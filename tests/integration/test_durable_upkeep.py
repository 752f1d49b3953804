"""Durable jobs in upkeep and in tests: `jobq prune` (and the supervisor's retention) delete
events emitted before the retention window and placeholders no job waits on, never one a
job waits for; jobq.testing's drain() counts suspensions and leaves a job waiting for an
event to its emit, and perform() raises JobSuspended rather than let Suspend out. On the
three databases (perform: its own in-memory queue)."""

from __future__ import annotations

from pathlib import Path

import pytest

import jobq
from jobq.testing import JobSuspended, drain, perform
from tests.support.gather_jobs import Parent
from tests.support.step_jobs import Sleeper, Waiter
from tests.support.waiting import wait_for

ONCE = jobq.RetryPolicy(max_attempts=1)


def pruned_event(queue: jobq.Queue, key: str) -> bool:
    """Prune with a 0 s window; whether the event `key` is gone."""
    queue.prune(0)
    return queue.backend.event_state(key) == (False, None)


def test_prune_deletes_events_past_the_window_but_none_a_job_waits_for(
    queue: jobq.Queue, tmp_path: Path
) -> None:
    queue.emit("taken", 1)
    job_id = queue.enqueue(Waiter(str(tmp_path / "journal"), "awaited"), retry=ONCE)
    assert queue.process_jobs(1) == 1
    queue.prune(3600)
    assert queue.backend.event_state("taken") == (True, "1")  # emitted within the window
    # SQLite's clock counts milliseconds: the event is past a 0 s window from the next one.
    wait_for("the event past the window", lambda: pruned_event(queue, "taken"))
    assert queue.awaited(job_id) == "awaited"
    assert queue.emit("awaited", "here") is True  # its placeholder and mark are still there
    assert queue.process_jobs(1) == 1
    assert queue.wait(job_id, timeout=0).result == "here"


def test_prune_deletes_the_placeholder_of_a_wait_whose_job_is_gone(
    queue: jobq.Queue, tmp_path: Path
) -> None:
    job_id = queue.enqueue(Waiter(str(tmp_path / "journal"), "never"), retry=ONCE)
    assert queue.process_jobs(1) == 1
    waits = "SELECT count(*) FROM jobq_events WHERE event_key = 'never'"
    queue.prune(0)
    assert queue.backend.fetchone(waits)[0] == 1
    assert queue.cancel(job_id) is True
    wait_for("the cancelled job pruned", lambda: queue.prune(0) == 1)
    assert queue.get(job_id) is None
    assert queue.backend.fetchone(waits)[0] == 0


def test_drain_counts_suspensions_and_runs_sleeps_past(queue: jobq.Queue, tmp_path: Path) -> None:
    journal = str(tmp_path / "journal")
    queue.enqueue(Sleeper(journal, 3600), retry=ONCE)
    drained = drain(queue, with_scheduled=True)
    assert (drained.completed, drained.suspended, drained.retried) == (1, 1, 0)
    assert drained.errors == {}


def test_drain_leaves_a_job_waiting_for_an_event_until_it_is_emitted(
    queue: jobq.Queue, tmp_path: Path
) -> None:
    job_id = queue.enqueue(Waiter(str(tmp_path / "journal"), "go"), retry=ONCE)
    drained = drain(queue, with_scheduled=True)  # ends: the wait is not brought forward
    assert (drained.completed, drained.suspended) == (0, 1)
    queue.emit("go", 7)
    assert drain(queue).results == {job_id: 7}


def test_drain_runs_a_gather_s_children_and_its_parent_to_the_end(
    queue: jobq.Queue, tmp_path: Path
) -> None:
    job_id = queue.enqueue(Parent(str(tmp_path / "journal"), [1, 2]))
    drained = drain(queue)
    assert drained.results[job_id] == [10, 20]
    assert drained.suspended == 1


def test_perform_raises_job_suspended_for_a_job_that_suspends(tmp_path: Path) -> None:
    with pytest.raises(JobSuspended, match="Suspended: sleeping until") as raised:
        perform(Sleeper(str(tmp_path / "journal"), 60))
    assert 0 < raised.value.delay <= 60
