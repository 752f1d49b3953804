"""Under --concurrency, an attempt ends only once everything it started has stopped: a thread a
coroutine handed work to, a process it or its thread started. Until then its outcome is not
recorded, so its retry cannot begin and its concurrency slot is not given to another attempt;
if it cannot be stopped, its worker is killed before the lease ends. Each test reads the
journal its jobs' pieces write (handoff_app.py): no entry of an attempt may come after the
first entry of the job's next attempt. And a stop the master sends for an attempt that has
just ended never fails the job's next attempt."""

from __future__ import annotations

import itertools
import random
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import jobq
from jobq.records import Status
from tests.support.apps.handoff_app import (
    FailsNearTimeout,
    HandsOff,
    LeavesProcess,
    LeavesProcessAsync,
    OneAtATime,
    Traced,
)
from tests.support.supervising import Supervisor, read_journal, supervisor
from tests.support.waiting import wait_for

ALL = ("sqlite", "postgresql", "mariadb")
ENDED = (Status.COMPLETED, Status.FAILED, Status.EXPIRED, Status.CANCELLED)
CONCURRENT = ("--app", "handoff_app", "--workers", "1", "--poll-interval", "0.2")


def ran_in_order(entries: list[dict[str, Any]], job: int) -> None:
    """Everything of the job's first attempt, its threads' and processes' entries included,
    happened before its second attempt began."""
    first = [e["mono"] for e in entries if e["job"] == job and e["attempt"] == 1]
    second = [e["mono"] for e in entries if e["job"] == job and e["attempt"] == 2]
    assert first, f"job {job}: its first attempt journaled nothing: {entries}"
    assert second, f"job {job}: its second attempt journaled nothing: {entries}"
    assert max(first) < min(second), (
        f"job {job}: its first attempt journaled {max(first) - min(second):.2f} s after its "
        f"retry began: {[e for e in entries if e['job'] == job]}"
    )


def settle(dsn: str, jobs: Sequence[Traced], args: Sequence[str]) -> tuple[list[int], Supervisor]:
    """Run the jobs under a supervisor until each one has ended; stop it (TERM)."""
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        ids = [queue.enqueue(job) for job in jobs]
        with supervisor(dsn, *CONCURRENT, *args) as running:

            def ended() -> bool:
                records = [queue.get(job_id) for job_id in ids]
                return all(r is not None and r.status in ENDED for r in records)

            wait_for("every job to end", ended, 90)
            running.signal(signal.SIGTERM)
            assert running.wait(30) == 0, running.log
    return ids, running


def records(dsn: str, ids: list[int]) -> list[jobq.JobRecord]:
    with jobq.Queue.connect(dsn) as queue:
        found = [queue.get(job_id) for job_id in ids]
    assert all(record is not None for record in found)
    return [record for record in found if record is not None]


@pytest.mark.databases(*ALL)
@pytest.mark.parametrize("grace", ["5", "0.5"])
def test_work_a_stopped_coroutine_handed_to_a_thread_ends_before_its_retry_begins(
    dsn: str, tmp_path: Path, grace: str
) -> None:
    """Cancelled by --job-timeout while a thread works for it for 4 s more, the coroutine's
    attempt waits for the thread (a kill grace of 5 s) or has its worker killed (0.5 s):
    either way the thread's work never lands after the retry began."""
    journal = str(tmp_path / "journal")
    jobs = [HandsOff(5.0, journal, how) for how in ("to_thread", "run_in_executor")]
    args = ("--concurrency", "4", "--job-timeout", "1", "--kill-grace", grace)
    ids, running = settle(dsn, jobs, args)
    entries = read_journal(Path(journal))
    for job_id in ids:
        ran_in_order(entries, job_id)
    for record in records(dsn, ids):
        assert (record.status, record.attempts) == (Status.COMPLETED, 2), record
    effects = [e for e in entries if e["event"] == "effect"]
    if grace == "5":
        assert len(effects) == 2, "the threads ran to their end before the retries"
        assert "exited (signal SIGKILL)" not in running.log
    else:
        assert not effects, "the worker was killed before the threads' work landed"
        assert "exited (signal SIGKILL)" in running.log


@pytest.mark.databases(*ALL)
def test_processes_a_failed_attempt_left_running_are_stopped_before_its_retry(
    dsn: str, tmp_path: Path
) -> None:
    """A thread job that leaves a child process and raises, one that leaves a daemon (which
    has left its parent), a coroutine that leaves a process it started with asyncio, and one
    that leaves a process a thread started for it: each failed attempt's process is killed
    before the outcome is recorded, so no tick of it comes after the retry began."""
    journal = str(tmp_path / "journal")
    jobs: list[Traced] = [
        LeavesProcess(30.0, journal, "child"),
        LeavesProcessAsync(30.0, journal, "asyncio"),
        LeavesProcessAsync(30.0, journal, "to_thread"),
    ]
    ids, _ = settle(dsn, jobs, ("--concurrency", "4"))
    # Alone, so that the daemon, which cannot be traced to its attempt, is that attempt's.
    daemon, _ = settle(dsn, [LeavesProcess(30.0, journal, "daemon")], ("--concurrency", "4"))
    entries = read_journal(Path(journal))
    for job_id in [*ids, *daemon]:
        ran_in_order(entries, job_id)
        assert any(e["job"] == job_id and e["event"] == "tick" for e in entries), "it started"
        assert not any(
            e["job"] == job_id and e.get("process") and e["event"] == "end" for e in entries
        )
    for record in records(dsn, [*ids, *daemon]):
        assert (record.status, record.attempts) == (Status.COMPLETED, 2), record


@pytest.mark.databases("sqlite", "postgresql")
def test_a_daemon_that_could_be_either_of_two_attempts_stops_their_worker(
    dsn: str, tmp_path: Path
) -> None:
    """One attempt works beside a process it started; another leaves a daemon, which has
    left its parent, and raises. The daemon could be either attempt's: the worker stops
    with both rather than let it outlive its attempt, and both jobs are retried once it and
    every process of theirs is gone."""
    journal = str(tmp_path / "journal")
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        holding = queue.enqueue(LeavesProcess(60.0, journal, "hold"))
        with supervisor(dsn, *CONCURRENT, "--concurrency", "4") as running:
            wait_for("the first process to tick", lambda: ticked(journal, holding), 30)
            daemon = queue.enqueue(LeavesProcess(60.0, journal, "daemon"))

            def retried() -> bool:
                found = [queue.get(job_id) for job_id in (holding, daemon)]
                return all(r is not None and r.status is Status.COMPLETED for r in found)

            wait_for("both jobs to be retried and complete", retried, 60)
            running.signal(signal.SIGTERM)
            assert running.wait(30) == 0, running.log
    assert "could be another attempt's" in running.log
    assert "exited (exit code 6)" in running.log
    entries = read_journal(Path(journal))
    for job_id in (holding, daemon):
        ran_in_order(entries, job_id)


def ticked(journal: str, job: int) -> bool:
    return any(e["job"] == job and e["event"] == "tick" for e in read_journal(Path(journal)))


@pytest.mark.databases(*ALL)
def test_a_concurrency_slot_is_freed_only_once_the_attempt_s_processes_have_stopped(
    dsn: str, tmp_path: Path
) -> None:
    """Concurrency(1) and a worker with four slots: each attempt starts a process and
    completes without waiting for it. The next attempt of the class starts only once the
    last one's process was stopped: their lives, from each attempt's start to its process's
    last tick, never overlap."""
    journal = str(tmp_path / "journal")
    jobs = [OneAtATime(2.0, journal, "child") for _ in range(4)]
    ids, _ = settle(dsn, jobs, ("--concurrency", "4"))
    entries = read_journal(Path(journal))
    lives = sorted(
        (min(e["mono"] for e in mine), max(e["mono"] for e in mine))
        for job_id in ids
        if (mine := [e for e in entries if e["job"] == job_id])
    )
    assert len(lives) == 4
    for (_, ended), (began, _) in itertools.pairwise(lives):
        assert ended < began, f"two attempts of the class ran at once: {lives}"


@pytest.mark.databases(*ALL)
def test_a_stop_that_reaches_the_worker_after_its_attempt_ended_never_fails_the_retry(
    dsn: str, tmp_path: Path
) -> None:
    """Coroutines that fail on their own right about when --job-timeout stops them: the stop
    of an attempt that has just ended reaches its worker after it claimed the job's retry.
    Named by its token, that stop is dropped, and every retry runs and completes."""
    journal = str(tmp_path / "journal")
    rng = random.Random(53)
    jobs = [FailsNearTimeout(1.0 + rng.uniform(-0.1, 0.1), journal, "sleep") for _ in range(40)]
    args = ("--concurrency", "40", "--job-timeout", "1")
    ids, _ = settle(dsn, jobs, args)
    never = [r for r in records(dsn, ids) if (r.status, r.attempts) != (Status.COMPLETED, 2)]
    assert not never, [(r.id, r.status, r.attempts, r.last_error) for r in never]
