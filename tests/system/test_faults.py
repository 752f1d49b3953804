"""Faults injected while real supervisors run real work, every run judged by the history
checker: no two attempts of one job overlapped, and no job was lost.

Each attempt journals its start and end (tests/support/apps/chaos_app.py); an attempt killed
before its end ended when its process was seen gone (chaos.observe.Deaths watches every
process under the supervisors through pidfds). The jobs table is read once the run has drained and
maintenance has run.

Covered elsewhere, not repeated here: the master's database link blackholed or slowed, and a
master SIGKILLed or SIGSTOPped while it holds one job (test_fencing.py); a rolling restart
(test_rollout.py). The soak (`python -m chaos`) mixes all of these at random.
"""

from __future__ import annotations

import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos.observe import Deaths, Observer, in_handle
from jobq.outcomes import LEASE_EXPIRED
from jobq.testing.history import read_journal
from tests.support.faults import (
    SETTINGS,
    all_completed,
    completed,
    doomed_and_survivor,
    ended,
    enqueue,
    judged,
    kill_busy_workers,
    kill_inside_a_job,
    mixed_lengths,
    records_of,
    worker_pids,
)
from tests.support.paths import REPO
from tests.support.servers import LocalServer
from tests.support.supervising import supervisor
from tests.support.waiting import wait_for

# Messages a worker logs when its database went away under it (jobq/worker/child.py).
UNACKNOWLEDGED = re.compile(r"Could not record how attempt (\d+) of job (\d+) ended")
RIDING_OUT = ("Claim failed", "Could not record how attempt", "Database out of reach")


# -- workers and a whole supervisor SIGKILLed --------------------------------------------------


def test_killed_workers_and_a_killed_supervisor_lose_nothing(dsn: str, tmp_path: Path) -> None:
    """Two supervisors share the database. Busy workers of both are SIGKILLed, ten times:
    each attempt is failed at once by its master and retried. Then one supervisor is
    SIGKILLed: its busy workers die with it, and the other supervisor's maintenance gives
    their jobs back after one lease."""
    rng = random.Random(7)
    journal = tmp_path / "journal"
    ids = enqueue(dsn, mixed_lengths(300, rng), journal)
    observer = Observer(dsn)
    with Deaths() as deaths, doomed_and_survivor(dsn, deaths) as (doomed, survivor):
        running = [doomed, survivor]
        kills = kill_busy_workers(observer, journal, deaths, running, rng, kills=10, every=20)
        # Once one of its workers is well inside a job, so the kill takes that job down.
        family = kill_inside_a_job(doomed, deaths, journal, at_least=0.5)
        entries = read_journal(journal)
        held = [e for e in entries if e["event"] == "start" and e["pid"] in family]
        held = [e for e in held if not ended(entries, e)]
        assert held, "the supervisor was killed holding no job in handle()"

        wait_for("every job to complete", lambda: all_completed(observer, len(ids)), 90)
        assert survivor.process.poll() is None, survivor.log
        assert observer.read(lambda queue: queue.run_maintenance()) == {
            "requeued": 0,
            "failed": 0,
            "expired": 0,
        }
        survivor.signal(signal.SIGTERM)
        assert survivor.wait(30) == 0, survivor.log
        assert doomed.wait(5) == -signal.SIGKILL

        records = records_of(observer, ids)
        report = judged(journal, deaths, records)
    observer.close()
    assert report.attempts_run >= len(ids) + len(kills) + len(held)
    by_id = {record.id: record for record in records}
    for start in held:
        # Nobody failed it: maintenance recovered it once its lease had run out.
        record = by_id[start["job"]]
        assert record.last_error == LEASE_EXPIRED, record
        assert record.attempts > start["attempt"], record


# -- the database server restarted --------------------------------------------------------------


@pytest.mark.databases("postgresql", "mariadb")
def test_workers_ride_out_a_database_restart(
    restartable_server: LocalServer, restartable_dsn: str, tmp_path: Path
) -> None:
    """The server is restarted while jobs run. Workers reconnect; attempts whose
    acknowledgement failed come back after their lease; the supervisor does not take the
    outage for a crash loop; every job completes."""
    rng = random.Random(11)
    journal = tmp_path / "journal"
    lengths = mixed_lengths(100, rng)
    lengths[30] = lengths[45] = 7.0  # longer than the 6 s lease: renewals span the restart
    ids = enqueue(restartable_dsn, lengths, journal)
    observer = Observer(restartable_dsn)
    with (
        Deaths() as deaths,
        supervisor(restartable_dsn, "--workers", "4", *SETTINGS) as running,
    ):
        deaths.family(running.pid)
        wait_for(
            "work under way, with a worker inside a long job",
            lambda: (
                completed(observer) >= 25
                and in_handle(read_journal(journal), worker_pids(running), at_least=1.0)
            ),
            timeout=60,
        )
        before = worker_pids(running)
        restarting = time.monotonic()  # CLOCK_MONOTONIC: the journal's clock too
        observer.close()
        restartable_server.restart()

        wait_for("every job to complete", lambda: all_completed(observer, len(ids)), 90)
        # Still the same master, running: an outage is not a crash loop.
        assert running.process.poll() is None, running.log
        assert "crash_loop" not in running.log
        assert "keep exiting" not in running.log
        assert any(text in running.log for text in RIDING_OUT), running.log
        # Some worker that was there before the restart ran jobs after it: it reconnected.
        after = {e["pid"] for e in read_journal(journal) if e["mono"] > restarting}
        assert before & after, f"no worker of {before} ran a job after the restart"
        assert observer.read(lambda queue: queue.run_maintenance()) is not None
        running.signal(signal.SIGTERM)
        assert running.wait(30) == 0, running.log

        records = records_of(observer, ids)
        judged(journal, deaths, records)
    observer.close()
    # An attempt whose acknowledgement failed was left to its lease, then run again.
    unacknowledged = [(int(j), int(a)) for a, j in UNACKNOWLEDGED.findall(running.log)]
    by_id = {record.id: record for record in records}
    for job, attempt in unacknowledged:
        record = by_id[job]
        # (Had the acknowledgement been applied and only its reply lost, the job would
        # simply be completed by that attempt.)
        assert record.attempts == attempt or record.last_error == LEASE_EXPIRED, record


# -- the soak, short --------------------------------------------------------------------------


@pytest.mark.timeout(240)
def test_short_soak() -> None:
    """`python -m chaos --jobs 1000 --seconds 60`: every fault at random for about a minute,
    then the checker. The full soak is `make chaos`."""
    result = subprocess.run(
        [sys.executable, "-m", "chaos", "--jobs", "1000", "--seconds", "60"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=200,
    )
    print(result.stdout)
    # The first line names the seed, which replays the same faults and jobs.
    head, tail = result.stdout[:300], result.stdout[-6000:]
    assert result.returncode == 0, f"{head}\n...\n{tail}\n{result.stderr[-6000:]}"
    assert "overlaps: 0" in result.stdout
    assert "lost: 0" in result.stdout
