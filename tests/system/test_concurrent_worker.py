"""jobq-supervise --concurrency with real processes: a worker runs many attempts at once,
coroutine jobs on its event loop and plain jobs in its threads, and the promise holds per
attempt. The history checker judges a run of both kinds under worker kills, job timeouts
and an operator's cancel: nothing lost, no two attempts of one job overlapping, a killed
worker's every attempt settled. (A frozen master: test_concurrent_frozen_master.py.)"""

from __future__ import annotations

import random
import signal
from functools import partial
from pathlib import Path

import pytest

import jobq
from chaos.observe import Deaths, Observer
from jobq.backends.postgresql.idle import IDLE
from jobq.records import Status
from jobq.testing.history import read_journal
from tests.support.apps import APPS
from tests.support.apps.chaos_app import Chaos, ChaosAsync, Stubborn
from tests.support.apps.supervised_app import Grow, Hold, Sleep
from tests.support.faults import (
    SETTINGS,
    completed_at_least,
    enqueue_both_kinds,
    judged,
    kill_a_busy_worker,
    mixed_lengths,
    records_of,
    settled,
)
from tests.support.paths import REPO
from tests.support.result_jobs import Resume, ResumeAsync
from tests.support.supervising import FAST, metrics_port, scrape, supervisor
from tests.support.waiting import wait_for

CONCURRENT = ("--workers", "2", "--concurrency", "20", "--job-timeout", "4")
ONCE = jobq.RetryPolicy(max_attempts=1)
# Longer than --job-timeout: stopped by it, with every sibling in its worker.
OVERRUN = 30.0
# Longer than the test needs to cancel it while it runs.
CANCELLED = 20.0


def running_attempt(journal: Path, job_id: int) -> bool:
    entries = read_journal(journal)
    starts = [e for e in entries if e["job"] == job_id and e["event"] == "start"]
    return bool(starts) and not any(e["job"] == job_id and e["event"] == "end" for e in entries)


@pytest.mark.databases("postgresql", "sqlite", "mariadb")
def test_many_attempts_at_once_lose_nothing_and_never_overlap_under_kills_timeouts_and_cancels(
    dsn: str, tmp_path: Path
) -> None:
    rng = random.Random(27)
    journal = tmp_path / "journal"
    ids = enqueue_both_kinds(dsn, mixed_lengths(160, rng), journal)
    observer = Observer(dsn)
    with (
        Deaths() as deaths,
        supervisor(dsn, *CONCURRENT, *SETTINGS) as running,
        jobq.Queue.connect(dsn) as queue,
    ):
        deaths.family(running.pid)
        for n in range(1, 3):
            wait_for(f"{30 * n} jobs done", partial(completed_at_least, observer, 30 * n), 60)
            kill_a_busy_worker(observer, journal, deaths, [running], rng)
        # Tried once each, so they come after the kills, which would fail them.
        cancelled = queue.enqueue(ChaosAsync(CANCELLED, str(journal)), retry=ONCE)
        wait_for("the job to cancel to run", partial(running_attempt, journal, cancelled), 60)
        assert queue.cancel(cancelled)
        wait_for("the cancel", lambda: queue.get(cancelled).status is Status.CANCELLED, 30)  # type: ignore[union-attr]
        # One of each kind runs past --job-timeout: its worker is stopped whole.
        overrun = [
            queue.enqueue(kind(OVERRUN, str(journal)), retry=ONCE) for kind in (Chaos, ChaosAsync)
        ]
        everything = [*ids, cancelled, *overrun]
        wait_for("every job to settle", partial(settled, observer, len(everything)), 120)
        running.signal(signal.SIGTERM)
        assert running.wait(30) == 0, running.log
        records = records_of(observer, everything)
        judged(journal, deaths, records)
    observer.close()
    by_id = {record.id: record for record in records}
    assert {by_id[job_id].status for job_id in ids} == {Status.COMPLETED}
    assert {by_id[job_id].status for job_id in overrun} == {Status.FAILED}
    errors = [by_id[job_id].last_error or "" for job_id in overrun]
    assert any("Job timed out after 4 s" in error for error in errors), errors
    assert by_id[cancelled].status is Status.CANCELLED


def journaled(journal: Path, job_id: int, event: str) -> list[dict[str, object]]:
    return [e for e in read_journal(journal) if e["job"] == job_id and e["event"] == event]


def status_of(queue: jobq.Queue, job_id: int) -> Status:
    record = queue.get(job_id)
    assert record is not None
    return record.status


def slots(port: int) -> tuple[float, float]:
    figures = scrape(port)
    return figures.value("jobq_worker_slots", state="busy"), figures.value(
        "jobq_worker_slots", state="free"
    )


@pytest.mark.databases("postgresql")
def test_a_cancelled_coroutine_stops_alone_and_one_that_swallows_the_cancel_takes_its_worker(
    dsn: str, tmp_path: Path
) -> None:
    """One worker runs a coroutine job to cancel among siblings: the cancel is raised into it
    alone, and the siblings run to completion on their first attempt. Then a coroutine that
    swallows its cancel: the master kills its whole worker once the kill grace is over. Its
    metrics count the worker's busy and free slots meanwhile."""
    journal = tmp_path / "journal"
    args = ["--workers", "1", "--concurrency", "10", "--app", "chaos_app", *FAST]
    args += ["--metrics-port", "0"]
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        polite = queue.enqueue(ChaosAsync(CANCELLED, str(journal)), retry=ONCE, priority=1)
        siblings = [queue.enqueue(kind(3.0, str(journal))) for kind in (Chaos, ChaosAsync) * 2]
        # A kill grace the timing rule allows on FAST's 6 s lease.
        with supervisor(dsn, *args, "--kill-grace", "0.5") as running:
            wait_for("every job to start", lambda: all(
                journaled(journal, job_id, "start") for job_id in (polite, *siblings)
            ), 30)  # fmt: skip
            port = metrics_port(running)
            wait_for("the master to count 5 busy slots", lambda: slots(port) == (5, 5), 30)
            assert queue.cancel(polite)
            wait_for("the cancel", lambda: status_of(queue, polite) is Status.CANCELLED, 30)
            wait_for("the siblings to complete", lambda: all(
                status_of(queue, job_id) is Status.COMPLETED for job_id in siblings
            ), 30)  # fmt: skip
            wait_for("the slots to be free again", lambda: slots(port) == (0, 10), 30)
            for job_id in siblings:
                record = queue.get(job_id)
                assert record is not None
                assert record.attempts == 1
            assert not journaled(journal, polite, "end")
            assert "exited (signal SIGKILL)" not in running.log

            stubborn = queue.enqueue(Stubborn(CANCELLED, str(journal)), retry=ONCE)
            wait_for("the stubborn job to start", lambda: journaled(journal, stubborn, "start"), 30)
            assert queue.cancel(stubborn)
            wait_for("its worker's kill", lambda: "exited (signal SIGKILL)" in running.log, 30)
            wait_for(
                "it to end cancelled", lambda: status_of(queue, stubborn) is Status.CANCELLED, 30
            )
            assert journaled(journal, stubborn, "swallowed"), "the cancel was raised into it"
            assert not journaled(journal, stubborn, "end")
            running.signal(signal.SIGTERM)
            assert running.wait(30) == 0, running.log


@pytest.mark.databases("postgresql", "sqlite")
def test_coroutine_and_thread_attempts_store_their_result_progress_and_checkpoints(
    dsn: str,
) -> None:
    """Each kind fails its first attempt midway; the second resumes from the first's
    checkpoint, reports its progress and returns its result, as in a process worker."""
    again = jobq.RetryPolicy(max_attempts=2, backoff=0, jitter=False)
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        ids = [queue.enqueue(kind(5, fail_at=2), retry=again) for kind in (Resume, ResumeAsync)]
        args = ("--workers", "1", "--concurrency", "4", "--app", "tests.support.result_jobs")
        env = {"PYTHONPATH": f"{APPS}:{REPO}"}
        with supervisor(dsn, *args, *FAST, env=env) as running:
            wait_for("both jobs to complete", lambda: all(
                status_of(queue, job_id) is Status.COMPLETED for job_id in ids
            ), 60)  # fmt: skip
            running.signal(signal.SIGTERM)
            assert running.wait(30) == 0, running.log
        for job_id in ids:
            record = queue.get(job_id)
            assert record is not None
            assert record.result == {"from": 2, "attempt": 2}
            assert record.progress is not None
            assert (record.progress.done, record.progress.total) == (5, 5)
            assert record.checkpoint is None, "cleared on completion"
            assert [entry.attempt for entry in record.history] == [1, 2]


@pytest.mark.databases("postgresql")
def test_recycling_and_a_drain_leave_no_attempt_in_flight_behind(dsn: str, tmp_path: Path) -> None:
    """--max-jobs-per-child 3 with 4 slots: a worker never claims past its third attempt,
    and is replaced once they are done. Then TERM while both kinds run: the drain waits for
    every attempt in flight. Every job completes on its first attempt."""
    journal = tmp_path / "journal"
    args = ("--workers", "1", "--concurrency", "4", "--max-jobs-per-child", "3", *FAST)
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        kinds = (Chaos, ChaosAsync)
        quick = [queue.enqueue(kinds[n % 2](0.3, str(journal))) for n in range(7)]
        with supervisor(dsn, *args, "--app", "chaos_app") as running:
            wait_for("the quick jobs to complete", lambda: all(
                status_of(queue, job_id) is Status.COMPLETED for job_id in quick
            ), 60)  # fmt: skip
            assert running.log.count("Recycling worker") >= 2, running.log
            slow = [queue.enqueue(kind(2.0, str(journal))) for kind in kinds]
            wait_for("the slow jobs to start", lambda: all(
                journaled(journal, job_id, "start") for job_id in slow
            ), 30)  # fmt: skip
            running.signal(signal.SIGTERM)
            assert running.wait(60) == 0, running.log
        for job_id in [*quick, *slow]:
            record = queue.get(job_id)
            assert record is not None
            assert (record.status, record.attempts) == (Status.COMPLETED, 1), running.log
            assert len(journaled(journal, job_id, "end")) == 1


@pytest.mark.databases("sqlite")
def test_a_worker_over_max_memory_is_recycled_once_its_attempts_in_flight_are_done(
    dsn: str, tmp_path: Path
) -> None:
    """Four slots: a job that keeps 300 MiB (over the 200 MiB ceiling) runs beside three
    held ones. Once it is recorded, the worker claims nothing more, lets the three finish,
    and only then is replaced: every job completes on its first attempt, the later ones in
    the new worker."""
    journal, release = tmp_path / "journal", tmp_path / "release"
    args = ("--workers", "1", "--concurrency", "4", "--max-memory-per-child", "200", *FAST)
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        # In claim order: the first claim takes these four at once.
        grow = queue.enqueue(Grow(300, str(journal)), priority=2)
        held = [queue.enqueue(Hold(str(journal), str(release)), priority=1) for _ in range(3)]
        later = [queue.enqueue(Sleep(0, str(journal))) for _ in range(2)]
        with supervisor(dsn, *args) as running:
            # Its outcome is recorded in the statement that also claims for the free slots.
            wait_for(
                "the big job's outcome", lambda: status_of(queue, grow) is Status.COMPLETED, 60
            )
            release.touch()
            wait_for("every job to complete", lambda: all(
                status_of(queue, job_id) is Status.COMPLETED for job_id in [*held, *later]
            ), 60)  # fmt: skip
            running.signal(signal.SIGTERM)
            assert running.wait(30) == 0, running.log
        for job_id in [grow, *held, *later]:
            record = queue.get(job_id)
            assert record is not None
            assert record.attempts == 1, record
    assert "Recycling worker: RSS" in running.log, running.log
    starts = {e["job"]: e for e in read_journal(journal) if e["event"] == "start"}
    (first,) = {starts[job_id]["pid"] for job_id in [grow, *held]}
    assert first not in {starts[job_id]["pid"] for job_id in later}, "run by its replacement"
    ends = [e["mono"] for e in read_journal(journal) if e["event"] == "end" and e["job"] in held]
    assert min(starts[job_id]["mono"] for job_id in later) > max(ends)


@pytest.mark.databases("postgresql")
def test_quit_stops_every_attempt_in_flight_and_each_comes_back(dsn: str, tmp_path: Path) -> None:
    """QUIT does not wait: the worker is killed with both kinds of attempt running, and each
    is settled as a failed attempt, its job pending for the next one."""
    journal = tmp_path / "journal"
    args = ("--workers", "1", "--concurrency", "4", "--app", "chaos_app", *FAST)
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        ids = [queue.enqueue(kind(CANCELLED, str(journal))) for kind in (Chaos, ChaosAsync)]
        with supervisor(dsn, *args) as running:
            wait_for("both jobs to start", lambda: all(
                journaled(journal, job_id, "start") for job_id in ids
            ), 30)  # fmt: skip
            running.signal(signal.SIGQUIT)
            running.wait(30)
        for job_id in ids:
            record = queue.get(job_id)
            assert record is not None
            assert (record.status, record.attempts) == (Status.PENDING, 1), running.log
            assert record.last_error, running.log
            assert not journaled(journal, job_id, "end")


@pytest.mark.databases("postgresql")
def test_free_slots_are_filled_in_claim_order_across_the_worker_s_types(
    dsn: str, tmp_path: Path
) -> None:
    """Two slots, four slow jobs of one type queued first, then a job of another type with a
    higher priority: the worker's slots take them in the claim order (priority, then
    schedule), across its types, so the other type's job starts first."""
    journal = tmp_path / "journal"
    args = ("--workers", "1", "--concurrency", "2", "--app", "chaos_app", *FAST)
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        slow = [queue.enqueue(Chaos(1.0, str(journal)), type="slow") for _ in range(4)]
        urgent = queue.enqueue(ChaosAsync(0.1, str(journal)), type="urgent", priority=1)
        # Only now may the worker start: all five wait, in the order claims take them.
        with supervisor(dsn, *args) as running:
            wait_for("every job to complete", lambda: all(
                status_of(queue, job_id) is Status.COMPLETED for job_id in [*slow, urgent]
            ), 60)  # fmt: skip
            running.signal(signal.SIGTERM)
            assert running.wait(30) == 0, running.log
    starts = [e["job"] for e in read_journal(journal) if e["event"] == "start"]
    assert starts[0] == urgent, starts
    assert starts[1:] == slow, starts


def marked_idle(queue: jobq.Queue) -> int:
    """Sessions holding the idle mark (backends/postgresql/idle.py), as a worker waiting for a
    wake-up does."""
    row = queue.backend.fetchone(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
        "AND classid = 0 AND objid = %(key)s",
        {"key": IDLE},
    )
    return int(row[0])


@pytest.mark.databases("postgresql")
def test_an_idle_concurrent_worker_is_woken_for_a_new_job(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    """With no attempt running it waits for the database's wake-up, as a process worker
    does: polling every 600 s, it would not see the job within the test's wait."""
    journal = tmp_path / "journal"
    args = ("--workers", "1", "--concurrency", "4", *FAST, "--poll-interval", "600")
    with supervisor(dsn, *args) as running:
        wait_for("the idle worker to wait for a wake-up", lambda: marked_idle(queue) == 1, 60)
        queue.enqueue(Sleep(0, str(journal)))
        wait_for("the job to run", lambda: len(read_journal(journal)) == 2, 60)
        wait_for("the worker to wait again", lambda: marked_idle(queue) == 1, 60)
        running.signal(signal.SIGTERM)
        assert running.wait(30) == 0, running.log
