"""A concurrency limit holds across three supervisors and a `jobq work` process on one
database, through SIGKILLed workers, a frozen master, a SIGKILLed master, cancels and
timeouts: judged from every attempt's journal, no key ever ran more attempts at once than
its limit, and nothing was lost."""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from functools import partial
from pathlib import Path

import pytest

import jobq
from chaos.observe import Deaths, Observer
from jobq.testing.history import read_journal
from tests.support.apps.chaos_app import ChaosLimited, OneAKey
from tests.support.faults import (
    SETTINGS,
    completed_at_least,
    judged,
    kill_a_busy_worker,
    records_of,
)
from tests.support.supervising import Supervisor, supervisor
from tests.support.waiting import wait_for

JOBS = 48
KEYS = 4
LIMIT = 2
CANCELLED = 4
LEASE = 6  # the lease of SETTINGS


def length(i: int, rng: random.Random) -> float:
    """Every third job long enough for a worker to be caught inside it."""
    return rng.uniform(0.8, 1.2) if i % 3 == 0 else rng.uniform(0.05, 0.3)


def finished(observer: Observer, jobs: int) -> bool:
    """Every job completed or cancelled: nothing pending, running or failed for good."""
    counts = observer.counts() or {}
    return set(counts) <= {"completed", "cancelled"} and sum(counts.values()) == jobs


def test_no_key_runs_beyond_its_limit_through_every_fault(dsn: str, tmp_path: Path) -> None:
    """Three supervisors and a `jobq work` process; workers SIGKILLed, one master frozen
    (SIGSTOP) until its attempts' leases end, another SIGKILLed, jobs cancelled while they
    wait or run, and one supervisor timing out the longer attempts (retried elsewhere)."""
    rng = random.Random(29)
    journal = tmp_path / "journal"
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        ids = [
            queue.enqueue(ChaosLimited(length(i, rng), str(journal), f"k{i % KEYS}"))
            for i in range(JOBS)
        ]
    observer = Observer(dsn)
    work = [sys.executable, "-m", "jobq", "work", "--dsn", dsn, "--app", "chaos_app"]
    timing_out = [*SETTINGS, "--job-timeout", "1"]
    with (
        Deaths() as deaths,
        supervisor(dsn, "--workers", "2", *SETTINGS) as doomed,
        supervisor(dsn, "--workers", "2", *SETTINGS) as frozen,
        supervisor(dsn, "--workers", "2", *timing_out) as survivor,
    ):
        for each in (doomed, frozen, survivor):
            deaths.family(each.pid)
        plain = Supervisor(dsn, ["--lease", "6", "--poll-interval", "0.2"], command=work)
        try:
            deaths.family(plain.pid)
            wait_for("6 jobs done", partial(completed_at_least, observer, 6), 60)
            kill_a_busy_worker(observer, journal, deaths, [doomed, frozen, survivor], rng)
            with jobq.Queue.connect(dsn) as queue:
                for job_id in rng.sample(ids[JOBS // 2 :], CANCELLED):
                    queue.cancel(job_id)
            # Frozen for longer than a lease: no renewal of its attempts, no report heard,
            # while its workers go on claiming (the freeze's length is the fault itself).
            frozen.signal(signal.SIGSTOP)
            thawed = time.monotonic() + LEASE + 1
            try:
                wait_for("a lease frozen", lambda: time.monotonic() > thawed, LEASE + 5)
            finally:
                frozen.signal(signal.SIGCONT)
            deaths.kill(doomed.pid)
            wait_for("every job finished", partial(finished, observer, JOBS), 120)
        finally:
            plain.stop()
    entries = read_journal(journal)
    assert {entry.get("key") for entry in entries} == {f"k{i}" for i in range(KEYS)}
    report = judged(journal, deaths, records_of(observer, ids), limit=LIMIT)
    assert report.jobs == JOBS
    assert report.statuses.get("cancelled", 0) >= 1, report.summary()


# One database: the wake-up's statements are each backend's, and the integration tests run
# them on all three (tests/integration/test_limits.py); this is the processes' path.
@pytest.mark.databases("postgresql")
def test_a_killed_master_s_slots_wake_their_blocked_jobs_before_maintenance_settles(
    dsn: str, tmp_path: Path
) -> None:
    """A master SIGKILLed while its attempts hold both slots of a key, two jobs blocked
    behind them: once the leases end, another supervisor's idle claims wake and run the
    blocked jobs, while the killed attempts are still unsettled (its maintenance is 10
    minutes off), so no maintenance did it."""
    journal = str(tmp_path / "journal")
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        held = [queue.enqueue(ChaosLimited(120, journal, "k")) for _ in range(2)]
        with supervisor(dsn, "--workers", "3", *SETTINGS) as doomed:
            # Enqueued once the slots are taken: enqueued with them, one could take a slot
            # first (a claim skips a row another claim holds and takes the next).
            wait_for("the key's slots held", lambda: all(
                status(queue, i) is jobq.Status.IN_PROGRESS for i in held
            ), 30)  # fmt: skip
            blocked = [queue.enqueue(ChaosLimited(0.1, journal, "k")) for _ in range(2)]
            wait_for("the key's other jobs blocked", lambda: (
                {job.id for job in queue.blocked()} == set(blocked)
            ), 30)  # fmt: skip
            os.kill(doomed.pid, signal.SIGKILL)
        late = [
            *SETTINGS[: SETTINGS.index("--maintenance-interval")],
            "--maintenance-interval",
            "600",
        ]
        with supervisor(dsn, "--workers", "2", *late):
            wait_for("the blocked jobs completed", lambda: all(
                status(queue, i) is jobq.Status.COMPLETED for i in blocked
            ), 30)  # fmt: skip
            assert all(status(queue, i) is jobq.Status.IN_PROGRESS for i in held)


@pytest.mark.databases("postgresql")
def test_a_pool_s_workers_share_a_backlog_of_keys(dsn: str) -> None:
    """90 keys of 12 short jobs each, one attempt of a key at once, enqueued before three
    workers start: each worker claims its share of the keys (a third), and since a key's
    next job is claimed by the acknowledgement of its last, keeps them. Doubling its
    claims while they came back full, the first worker up took most keys before the
    others had claimed twice, and ran their jobs in series (worker/key_share.py)."""
    keys, per_key = 90, 12
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        queue.enqueue_many([OneAKey(f"k{i % keys}", 0.003) for i in range(keys * per_key)])
        with supervisor(dsn, "--workers", "3", *SETTINGS):
            wait_for("the backlog done", lambda: (
                queue.backend.fetchone(
                    "SELECT count(*) FROM jobq_jobs WHERE status = 'completed'"
                )[0] == keys * per_key
            ), 60)  # fmt: skip
        held = dict(queue.backend.fetchall(
            "SELECT worker, count(DISTINCT limit_key) FROM jobq_jobs GROUP BY worker"
        ))  # fmt: skip
    # Doubling, they held 21, 30 and 41. A key's chain (12 claims of about 30 jobs) lasts
    # longer than the workers take to start, so none is done with its share and takes
    # another's before that one claims.
    assert max(held.values()) <= keys // 3 + 2, f"keys run by each worker: {held}"


def status(queue: jobq.Queue, job_id: int) -> jobq.Status | None:
    record = queue.get(job_id)
    return None if record is None else record.status
