"""The supervisor's job cleaner: finished jobs go once older than their retention, while
pending, running and waiting jobs and those still within their retention stay; and a
cleaner that finds another pruning leaves the work to it, one pruner at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

import jobq
from tests.support.apps.supervised_app import Fail, Hold, Sleep
from tests.support.supervising import FAST, supervisor
from tests.support.waiting import wait_for

ONCE = jobq.RetryPolicy(max_attempts=1)
RETAIN = ("--retain-completed", "4s", "--retain-failed", "1h")
LEFT = "Retention: another process is pruning"


def status(queue: jobq.Queue, job_id: int) -> str | None:
    record = queue.get(job_id)
    return None if record is None else str(record.status)


def test_completed_jobs_go_and_unfinished_or_recent_ones_stay(dsn: str, tmp_path: Path) -> None:
    journal, release = str(tmp_path / "journal"), str(tmp_path / "release")
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        done = queue.enqueue_many([Sleep(0, journal) for _ in range(3)])
        failed = queue.enqueue(Fail("kept an hour", journal), retry=ONCE)
        later = queue.enqueue(Sleep(0, journal), delay=3600)
        held = queue.enqueue(Hold(journal, release))
        after = queue.enqueue(Sleep(0, journal), after=[held])
        # One job a claim: a batch's completions are acknowledged with the held job's.
        with supervisor(dsn, *FAST, *RETAIN, "--workers", "2", "--prefetch", "1") as running:
            wait_for(
                "the completed jobs to be pruned",
                lambda: all(queue.get(job_id) is None for job_id in done),
            )
            running.wait_for_log("Retention: deleted")
            assert status(queue, failed) == "failed"
            assert status(queue, later) == "pending"
            assert status(queue, held) == "in_progress"
            assert status(queue, after) == "waiting"
            Path(release).touch()
            wait_for(
                "the held job and its dependent to be pruned",
                lambda: queue.get(held) is None and queue.get(after) is None,
            )
            assert status(queue, failed) == "failed"
            assert status(queue, later) == "pending"


@pytest.mark.databases("postgresql", "mariadb")  # SQLite: its own write lock, see pruning()
def test_a_cleaner_finding_another_pruning_leaves_the_work_to_it(dsn: str, tmp_path: Path) -> None:
    journal = str(tmp_path / "journal")
    with jobq.Queue.connect(dsn) as queue, jobq.Queue.connect(dsn) as pruner:
        queue.install()
        done = queue.enqueue_many([Sleep(0, journal) for _ in range(3)])
        assert queue.process_jobs(3) == 3
        with (
            supervisor(dsn, *FAST, *RETAIN, "--workers", "1") as first,
            supervisor(dsn, *FAST, *RETAIN, "--workers", "1") as second,
        ):
            with pruner.backend.pruning() as alone:
                assert alone
                # Held as another supervisor's batch would be: the two leave it alone,
                # however old the jobs, at each of their runs.
                wait_for("the jobs to be past their retention", lambda: oldest(queue) > 4.5)
                for running in (first, second):
                    seen = sum(LEFT in line for line in running.lines)
                    running.wait_for_log(LEFT, count=seen + 1)
                assert all(status(queue, job_id) == "completed" for job_id in done)
            wait_for(
                "the jobs to be pruned once the other pruner let go",
                lambda: all(queue.get(job_id) is None for job_id in done),
            )


def oldest(queue: jobq.Queue) -> float:
    return queue.oldest_finished() or 0.0
