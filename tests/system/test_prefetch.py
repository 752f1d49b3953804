"""jobq-supervise --prefetch with real processes: a worker's claimed jobs that never started
go back to pending at once, their attempts uncounted, whichever way the worker ends; the
ones it completed are acknowledged for it, never run again; and the history checker finds
nothing lost and no overlap under kills, a frozen master and drains."""

from __future__ import annotations

import itertools
import os
import random
import re
import signal
from datetime import timedelta
from functools import partial
from pathlib import Path

import pytest

import jobq
from chaos.observe import Deaths, Observer, busy_workers
from jobq.records import Status
from jobq.testing.history import check, read_journal
from tests.support.apps.chaos_app import Chaos
from tests.support.apps.supervised_app import Crash, Echo, Grow, Hold, Sleep
from tests.support.faults import (
    SETTINGS,
    all_completed,
    completed,
    completed_at_least,
    enqueue,
    judged,
    kill_a_busy_worker,
    mixed_lengths,
    records_of,
    worker_pids,
)
from tests.support.supervising import (
    FAST,
    Supervisor,
    alive,
    events,
    metrics_port,
    scrape,
    supervisor,
    wait_for_events,
)
from tests.support.waiting import wait_for

# A lease far longer than the tests' waits: a job back within them was released by jobq, not
# recovered by maintenance after its lease.
LONG_LEASE = (*FAST, "--lease", "60")
# One worker taking the head job and QUEUED more in one claim.
QUEUED = 3
PREFETCH = ("--workers", "1", "--prefetch", str(QUEUED + 1))
ONCE = jobq.RetryPolicy(max_attempts=1)
# The master's line for a worker that died of SIGKILL.
KILLED = re.compile(r"Worker (\d+) exited \(signal SIGKILL\)")
# How long a dead worker's rows may stay in progress: its settlement, far below the lease.
SETTLEMENT = 15.0


def enqueue_batch(queue: jobq.Queue, head: jobq.Job, journal: Path) -> tuple[int, list[int]]:
    """The head job first (by priority), then QUEUED short ones: the worker's first claim."""
    first = queue.enqueue(head, priority=10, retry=ONCE)
    return first, [queue.enqueue(Sleep(0, str(journal))) for _ in range(QUEUED)]


def record(queue: jobq.Queue, job_id: int) -> jobq.JobRecord:
    found = queue.get(job_id)
    assert found is not None
    return found


def assert_released_then_run_once(
    queue: jobq.Queue, journal: Path, queued: list[int], worker: int
) -> None:
    """Each queued job ran once, attempt 1, in a worker other than the one that claimed it:
    it came back uncounted, and long before its lease."""
    wait_for(
        "the queued jobs to complete",
        lambda: all(record(queue, job_id).status is Status.COMPLETED for job_id in queued),
        timeout=30,
    )
    for job_id in queued:
        assert record(queue, job_id).attempts == 1, record(queue, job_id)
        starts = events(journal, "start", job_id)
        assert [start["attempt"] for start in starts] == [1], starts
        assert starts[0]["pid"] != worker, "it ran in the worker that was ended"


def assert_no_overlap(queue: jobq.Queue, journal: Path, ids: list[int]) -> None:
    report = check(read_journal(journal), [record(queue, job_id) for job_id in ids])
    assert not report.overlaps, report.summary()


def run_ending(queue: jobq.Queue, dsn: str, tmp_path: Path, ending: str) -> None:
    """Start a prefetching worker on a head job and QUEUED more, end it the `ending` way
    while it runs the head job, and check the queued ones row by row."""
    journal, release = tmp_path / "journal", tmp_path / "release"
    args = [*PREFETCH, *LONG_LEASE, "--metrics-port", "0"]
    if ending == "recycle":
        head: jobq.Job = Grow(300, str(journal))
        args += ["--max-memory-per-child", "200"]
    else:
        head = Hold(str(journal), str(release))
    if ending == "job-timeout":
        args += ["--job-timeout", "1"]
    first, queued = enqueue_batch(queue, head, journal)
    with supervisor(dsn, *args) as running:
        worker = wait_for_events(journal, "start")[0]["pid"]
        if ending == "kill":
            os.kill(worker, signal.SIGKILL)
        if ending == "cancel":
            # The next renewal round sees it, and the master stops the worker.
            assert queue.cancel(first)
        if ending == "drain":
            running.signal(signal.SIGTERM)
            running.wait_for_log(f"Retiring worker {worker}")
            release.touch()
            assert running.wait(30) == 0, running.log
            for job_id in queued:
                row = record(queue, job_id)
                assert (row.status, row.attempts, row.lease_until) == (
                    Status.PENDING,
                    0,
                    None,
                ), row
            assert record(queue, first).status is Status.COMPLETED
            assert events(journal, "start", queued[0]) == []
        else:
            assert_released_then_run_once(queue, journal, queued, worker)
            released = scrape(metrics_port(running)).value("jobq_jobs_released_total")
            assert released == QUEUED, released
            running.signal(signal.SIGTERM)
            assert running.wait(30) == 0, running.log
    # The worker, or its master once it was gone, put them back: they were in its claim.
    assert f"Released unstarted jobs {', '.join(map(str, queued))}" in running.log, running.log
    assert_no_overlap(queue, journal, [first, *queued])


# On PostgreSQL a batch's acknowledgement is one statement, whose time each of its jobs'
# updated_at holds (finished_at is each attempt's own end): its jobs are those that share one.
@pytest.mark.databases("postgresql")
def test_an_adaptive_worker_s_first_acknowledgement_claims_a_batch(
    dsn: str, tmp_path: Path
) -> None:
    """A worker that has seen no job claims one. Its acknowledgement claims what the
    prefetch rule asks for once that job has run (ten, for a short one); acknowledged with
    the claim of one more, as --prefetch 1 does, every start of a worker began with two
    single claims. The acknowledgements then double, as each claim comes back full."""
    journal = str(tmp_path / "journal")
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        queue.enqueue_many([Chaos(0, journal) for _ in range(100)])
        with supervisor(dsn, "--workers", "1", *SETTINGS):
            wait_for("the jobs done", partial(all_completed, Observer(dsn), 100), 30)
        acknowledged = queue.backend.fetchall(
            "SELECT count(*) FROM jobq_jobs GROUP BY updated_at ORDER BY updated_at"
        )
    assert [n for (n,) in acknowledged][:4] == [1, 10, 20, 40]


@pytest.mark.parametrize("ending", ["kill", "drain"])
def test_a_worker_s_unstarted_jobs_go_back_at_once_uncounted_when_killed_or_drained(
    queue: jobq.Queue, dsn: str, tmp_path: Path, ending: str
) -> None:
    run_ending(queue, dsn, tmp_path, ending)


@pytest.mark.databases("postgresql")
@pytest.mark.parametrize("ending", ["job-timeout", "recycle", "cancel"])
def test_a_worker_s_unstarted_jobs_go_back_at_once_uncounted_when_timed_out_recycled_or_cancelled(
    queue: jobq.Queue, dsn: str, tmp_path: Path, ending: str
) -> None:
    run_ending(queue, dsn, tmp_path, ending)


@pytest.mark.databases("postgresql")
def test_a_worker_its_fence_keeper_killed_under_a_frozen_master_has_its_unstarted_jobs_released(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    journal, release = tmp_path / "journal", tmp_path / "release"
    first, queued = enqueue_batch(queue, Hold(str(journal), str(release)), journal)
    # The queued leases, renewed with the running one, outlive its fence by the safety
    # margin: room for the thawed master to release them before maintenance could.
    args = [*PREFETCH, *FAST, "--lease", "8", "--safety-margin", "3"]
    with supervisor(dsn, *args) as running:
        worker = wait_for_events(journal, "start")[0]["pid"]
        running.signal(signal.SIGSTOP)
        try:
            wait_for("the fence keeper to kill the worker", lambda: not alive(worker), 15)
        finally:
            running.signal(signal.SIGCONT)
        assert_released_then_run_once(queue, journal, queued, worker)
        running.signal(signal.SIGTERM)
        assert running.wait(30) == 0, running.log
    assert f"Released unstarted jobs {', '.join(map(str, queued))}" in running.log, running.log
    assert_no_overlap(queue, journal, [first, *queued])


@pytest.mark.databases("postgresql")
def test_a_queued_job_whose_lease_is_half_gone_is_released_not_started(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    # With FAST's 6 s lease, a head job of 4 s leaves the one queued behind it less than half
    # of what its lease vouches for (4.9 s to the kill point).
    head = queue.enqueue(Sleep(4, str(journal)), priority=10)
    behind = queue.enqueue(Sleep(0, str(journal)))
    with supervisor(dsn, "--workers", "1", "--prefetch", "2", *FAST) as running:
        running.wait_for_log(f"Job {behind} waited half its lease")
        wait_for(
            "both jobs to complete",
            lambda: (
                {record(queue, head).status, record(queue, behind).status} == {Status.COMPLETED}
            ),
            timeout=30,
        )
        running.signal(signal.SIGTERM)
        assert running.wait(30) == 0, running.log
    assert f"Released unstarted jobs {behind}" in running.log
    assert record(queue, behind).attempts == 1, "the release did not count an attempt"
    assert [start["attempt"] for start in events(journal, "start", behind)] == [1]


@pytest.mark.databases("postgresql", "sqlite")
def test_jobs_a_killed_worker_completed_are_acknowledged_by_its_master_not_run_again(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    # In claim order: two short jobs, completed and awaiting their acknowledgement with the
    # next claim, then one that kills its worker.
    done = [queue.enqueue(Sleep(0, str(journal)), priority=10 - n) for n in range(2)]
    crash = queue.enqueue(Crash(str(journal)), retry=ONCE)
    with supervisor(dsn, "--workers", "1", "--prefetch", "3", *LONG_LEASE) as running:
        wait_for("the crash to be failed", lambda: record(queue, crash).status is Status.FAILED)
        wait_for(
            "the completed jobs to be acknowledged",
            lambda: all(record(queue, job_id).status is Status.COMPLETED for job_id in done),
            timeout=30,
        )
        running.signal(signal.SIGTERM)
        assert running.wait(30) == 0, running.log
    assert f"and jobs {done[0]}, {done[1]} completed and not acknowledged" in running.log
    for job_id in done:
        assert record(queue, job_id).attempts == 1
        assert len(events(journal, "start", job_id)) == 1, "a completed job ran again"


@pytest.mark.databases("postgresql", "sqlite")
def test_a_worker_killed_mid_batch_has_each_attempt_settled_as_it_stood(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    """Its master learns of its starts from its fence slot alone: SIGKILLed while it runs
    the fourth attempt of its claim, the three it completed are acknowledged (the one with
    a result, with it), the fourth is failed as an attempt, the two behind it go back at
    once, uncounted; nothing ran twice or overlapped."""
    journal, release = tmp_path / "journal", tmp_path / "release"
    jobs: list[jobq.Job] = [Sleep(0, str(journal)), Echo(0, str(journal), {"rows": 3})]
    jobs.append(Sleep(0, str(journal)))
    done = [queue.enqueue(job, priority=10 - n) for n, job in enumerate(jobs)]
    held = queue.enqueue(Hold(str(journal), str(release)), priority=5, retry=ONCE)
    queued = [queue.enqueue(Sleep(0, str(journal))) for _ in range(2)]
    with supervisor(dsn, "--workers", "1", "--prefetch", "6", *LONG_LEASE) as running:
        worker = wait_for("the fourth job to start", lambda: events(journal, "start", held))
        os.kill(worker[0]["pid"], signal.SIGKILL)
        wait_for("the killed attempt to fail", lambda: record(queue, held).status is Status.FAILED)
        assert_released_then_run_once(queue, journal, queued, worker[0]["pid"])
        running.signal(signal.SIGTERM)
        assert running.wait(30) == 0, running.log
    assert f"and jobs {', '.join(map(str, done))} completed and not acknowledged" in running.log
    for job_id in done:
        row = record(queue, job_id)
        assert (row.status, row.attempts) == (Status.COMPLETED, 1), row
        assert len(events(journal, "start", job_id)) == 1, "a completed job ran again"
    assert record(queue, done[1]).result == {"rows": 3}
    assert record(queue, held).attempts == 1
    assert_no_overlap(queue, journal, [*done, held, *queued])


@pytest.mark.databases("postgresql")
def test_prefetching_workers_lose_nothing_under_kills_a_frozen_master_and_drains(
    dsn: str, tmp_path: Path
) -> None:
    """Two supervisors share the database, one with a fixed --prefetch, one adaptive. Busy
    workers are SIGKILLed; then the fixed one's master is frozen while the other works on,
    and thawed; then it drains. The checker judges the whole history."""
    rng = random.Random(18)
    journal = tmp_path / "journal"
    ids = enqueue(dsn, mixed_lengths(240, rng), journal)
    observer = Observer(dsn)
    with (
        Deaths() as deaths,
        supervisor(dsn, "--workers", "3", "--prefetch", "5", *SETTINGS) as fixed,
        supervisor(dsn, "--workers", "3", *SETTINGS) as adaptive,
    ):
        deaths.family(fixed.pid)
        deaths.family(adaptive.pid)
        for n in range(1, 5):
            wait_for(f"{20 * n} jobs done", partial(completed_at_least, observer, 20 * n), 60)
            kill_a_busy_worker(observer, journal, deaths, [fixed, adaptive], rng)

        wait_for("a busy worker under the master to freeze", lambda: busy_workers(fixed.pid), 30)
        fixed.signal(signal.SIGSTOP)
        try:
            # The other supervisor works on meanwhile: the frozen master's workers' leases
            # run out unrenewed (its fence keeper kills the busy ones).
            later = completed(observer) + 30
            wait_for("work to go on", partial(completed_at_least, observer, later), 60)
        finally:
            fixed.signal(signal.SIGCONT)
        wait_for("more work after the thaw", partial(completed_at_least, observer, later + 20), 60)
        fixed.signal(signal.SIGTERM)
        assert fixed.wait(30) == 0, fixed.log

        wait_for("every job to complete", lambda: all_completed(observer, len(ids)), 120)
        adaptive.signal(signal.SIGTERM)
        assert adaptive.wait(30) == 0, adaptive.log
        judged(journal, deaths, records_of(observer, ids))
    observer.close()


def held_by(observer: Observer, pid: int) -> list[int]:
    """The jobs in progress under a claim of process `pid` (None: the database did not
    answer, which is not an answer)."""
    rows = observer.read(lambda queue: queue.jobs(status=Status.IN_PROGRESS, limit=1000))
    return [-1] if rows is None else [row.id for row in rows if row.pid == pid]


def settled(observer: Observer, pid: int) -> bool:
    return not held_by(observer, pid)


def killed_pids(running: Supervisor) -> list[int]:
    return [int(found.group(1)) for found in map(KILLED.search, running.messages()) if found]


def kill_a_worker(
    running: Supervisor, deaths: Deaths, flag: Path | None, rng: random.Random
) -> int:
    """SIGKILL one of its workers, from inside right after a claim's commit if `flag` is
    given, else from outside; once its master reaped it, its pid."""
    before = len(killed_pids(running))
    if flag is not None:
        flag.touch()
    else:
        deaths.refresh()
        deaths.kill(rng.choice(sorted(worker_pids(running))))
    wait_for("the master to reap the killed worker", lambda: len(killed_pids(running)) > before, 30)
    return killed_pids(running)[-1]


def test_no_job_stays_held_after_a_prefetching_worker_is_killed_at_any_moment(
    dsn: str, tmp_path: Path
) -> None:
    """Workers claiming 8 jobs at a time are SIGKILLed during a drain, on a 60 s lease: after
    each kill, every row the dead worker claimed is settled within SETTLEMENT, by its
    worker id, whether or not it had reported the claim. Every other kill comes from inside,
    in the window between a claim's commit and its report, which an outside kill can
    hardly hit on purpose: an after_job hook (claim_kill_app) SIGKILLs its worker once the
    acknowledgement that claimed its next jobs committed. The others hit a random worker
    at a random moment."""
    rng = random.Random(24)
    journal, flag = tmp_path / "journal", tmp_path / "kill-after-commit"
    ids = enqueue(dsn, [rng.uniform(0, 0.02) for _ in range(300)], journal)
    observer = Observer(dsn)
    args = ["--app", "claim_kill_app", *LONG_LEASE, "--workers", "2", "--prefetch", "8"]
    env = {"KILL_AFTER_COMMIT": str(flag)}
    with Deaths() as deaths, supervisor(dsn, *args, env=env) as running:
        deaths.family(running.pid)
        for n in range(4):
            done = 40 * (n + 1)
            wait_for(f"{done} jobs done", partial(completed_at_least, observer, done), 60)
            victim = kill_a_worker(running, deaths, flag if n % 2 == 0 else None, rng)
            wait_for(
                f"the jobs worker {victim} held to be settled",
                partial(settled, observer, victim),
                SETTLEMENT,
            )
        wait_for("every job to complete", lambda: all_completed(observer, len(ids)), 120)
        running.signal(signal.SIGTERM)
        assert running.wait(30) == 0, running.log
        judged(journal, deaths, records_of(observer, ids))
    observer.close()


def test_a_worker_s_queued_jobs_read_claimed_until_each_runs_with_its_own_times(
    dsn: str, tmp_path: Path
) -> None:
    """Issue 54, item 11: a worker that claimed a head job and two behind it ran them one
    after another, yet all three read as running at once, sharing a start and an end. The
    ones behind read as claimed until they run; each attempt keeps its own start and end."""
    journal, release = tmp_path / "journal", tmp_path / "release"
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        first = queue.enqueue(Hold(str(journal), str(release)), priority=10)
        queued = [queue.enqueue(Sleep(0.05, str(journal))) for _ in range(2)]
        with supervisor(dsn, "--workers", "1", "--prefetch", "3", *LONG_LEASE) as running:
            wait_for_events(journal, "start")
            assert record(queue, first).attempted_at is not None
            for job_id in queued:
                waiting = record(queue, job_id)
                assert waiting.status is Status.IN_PROGRESS, waiting
                assert (waiting.started_at, waiting.attempted_at) == (None, None), waiting
            release.touch()
            wait_for("the jobs done", partial(all_completed, Observer(dsn), 3), 30)
            running.signal(signal.SIGTERM)
            assert running.wait(30) == 0, running.log
        entries = [record(queue, job_id).history for job_id in (first, *queued)]
    attempts = [only for (only,) in entries]
    for before, after in itertools.pairwise(attempts):
        assert before.started_at is not None
        assert before.finished_at is not None
        assert after.started_at is not None
        assert before.started_at < before.finished_at
        # Each recorded by its own statement, from the database's clock: SQLite's counts
        # milliseconds.
        assert before.finished_at <= after.started_at + timedelta(milliseconds=1), attempts


def test_a_long_job_queued_behind_a_short_one_reads_as_running_within_a_renewal_round(
    dsn: str, tmp_path: Path
) -> None:
    """The master's renewal round records the start of a queued attempt that its worker's
    fence slot says started: a long job does not read as claimed until it ends."""
    journal, release = tmp_path / "journal", tmp_path / "release"
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        first = queue.enqueue(Sleep(0, str(journal)), priority=10)
        long = queue.enqueue(Hold(str(journal), str(release)))
        with supervisor(dsn, "--workers", "1", "--prefetch", "2", *LONG_LEASE) as running:
            started = wait_for_events(journal, "start", 2)
            assert [event["job"] for event in started] == [first, long], started
            # FAST's rounds are a second apart: the next records the start.
            wait_for(
                "the long job to read as running",
                lambda: record(queue, long).attempted_at is not None,
                timeout=30,
            )
            assert record(queue, long).status is Status.IN_PROGRESS
            assert events(journal, "end", long) == []
            release.touch()
            wait_for("the jobs done", partial(all_completed, Observer(dsn), 2), 30)
            running.signal(signal.SIGTERM)
            assert running.wait(30) == 0, running.log
        done = record(queue, long)
    # The round's start, kept by the acknowledgement (a float in the history's JSON).
    (entry,) = done.history
    assert entry.started_at is not None
    assert done.attempted_at is not None
    assert abs(entry.started_at - done.attempted_at) < timedelta(milliseconds=1)
