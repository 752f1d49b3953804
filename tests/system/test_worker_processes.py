"""Processes a worker starts in on_worker_start are the worker's: the sweep of an attempt's
leftover processes spares them, and still kills what a job left behind."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

import jobq
from tests.support.supervising import FAST, supervisor
from tests.support.waiting import wait_for


class UsePool(jobq.Job):
    """The producer's side of pool_app.UsePool (same job_name)."""

    job_name = "UsePool"


class LeaveBehind(jobq.Job):
    job_name = "LeaveBehind"


@pytest.mark.databases("sqlite")
def test_a_pool_started_in_on_worker_start_outlives_every_job(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    first = [queue.enqueue(UsePool()) for _ in range(2)]
    careless = queue.enqueue(LeaveBehind())
    then = [queue.enqueue(UsePool()) for _ in range(2)]
    journal = tmp_path / "journal"
    args = ("--workers", "1", "--prefetch", "1", "--app", "pool_app", *FAST)
    with supervisor(dsn, *args, env={"POOL_JOURNAL": str(journal)}) as running:
        wait_for("every job to complete", lambda: queue.counts() == {"completed": 5}, timeout=60)
        running.signal(signal.SIGTERM)
        assert running.wait() == 0, running.log
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [entry["job"] for entry in entries] == [*first, *then]
    assert len({entry["worker"] for entry in entries}) == 1
    # The same pool processes and sidecar served every job, before and after the sweep that
    # killed what LeaveBehind left.
    assert all(entry["sidecar_running"] for entry in entries), entries
    assert len({(tuple(e["pool"]), e["sidecar"]) for e in entries}) == 1, entries
    assert all(set(e["answered"]) <= set(e["pool"]) for e in entries), entries
    swept = [line for line in running.lines if "left processes running" in line]
    assert len(swept) == 1, running.log
    assert f"Job {careless} " in swept[0]
