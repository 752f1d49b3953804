"""A PostgreSQL failover while jobs run, on synchronous replication: the promise holds.

One scenario, shared by every test here (it is the slow part): a primary and a synchronous
standby on loopback; a supervisor on a multi-host DSN drains jobs of mixed lengths, a few
longer than the failover window. The primary is stopped as a crash would (`-m immediate`);
the window lasts until /readyz says so and a worker could not record how an attempt ended;
then the standby is promoted. That acknowledgement lands on the new primary, work goes on
without a restart, and the history checker judges the run. The CLI and `jobq web` then read
the promoted database through the same DSN, whose first host is down for good.

A window longer than a lease, where the master fences what it cannot renew, is
test_fencing.py's, on a blackholed link.
"""

from __future__ import annotations

import random
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import jobq
from chaos.observe import Deaths, Observer, in_handle
from jobq.records import JobRecord
from jobq.testing.history import Report, read_journal
from tests.support.faults import (
    SETTINGS,
    all_completed,
    completed,
    enqueue,
    judged,
    mixed_lengths,
    records_of,
    worker_pids,
)
from tests.support.replication import ReplicatedPair, replicated_postgresql
from tests.support.supervising import Supervisor, http_get, metrics_port, supervisor
from tests.support.waiting import wait_for
from tests.support.web import jobq_web

# Longer than the window: their leases are renewed across it.
LONG_JOB = 8.0
LONG_JOBS = (1, 6)
# In the DSN (trust authentication never asks for it): nothing may show it.
PASSWORD = "failover-secret"
# A worker's line when an acknowledgement failed and is tried again (worker/recording.py).
ACK_RETRY = re.compile(r"Could not record how attempt (\d+) of job (\d+) ended")
GAVE_UP = re.compile(r"Could not record how attempt (\d+) of job (\d+) ended, so the job will")


@dataclass
class Readiness:
    """/readyz polled in a thread of the test: (CLOCK_MONOTONIC, status) of every answer."""

    port: int
    seen: list[tuple[float, int]] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)

    def poll(self) -> None:
        while not self.stopping.wait(0.05):
            try:
                status, _ = http_get(self.port, "/readyz", timeout=2)
            except OSError:
                continue
            self.seen.append((time.monotonic(), status))

    def after(self, moment: float) -> list[int]:
        return [status for at, status in list(self.seen) if at > moment]

    def between(self, start: float, end: float) -> list[int]:
        return [status for at, status in list(self.seen) if start < at < end]


@dataclass
class Failover:
    pair: ReplicatedPair
    dsn: str
    ids: list[int]
    records: list[JobRecord]
    report: Report
    readiness: Readiness
    crashed: float
    promoted: float
    drained: float
    log: str
    masters: tuple[int, int]  # the master's pid before the crash, and after the drain
    workers_before: set[int]
    ran_after: set[int]  # pids of the workers that started attempts after the promotion
    titles: list[str]  # every process's title in the window


def long_job_under_way(journal: Path, running: Supervisor) -> bool:
    """A worker is inside a long job that will outlast the window."""
    return bool(in_handle(read_journal(journal), worker_pids(running), at_least=LONG_JOB - 2.5))


@pytest.fixture(scope="module")
def failover(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Failover]:
    journal = tmp_path_factory.mktemp("failover") / "journal"
    with replicated_postgresql(synchronous=True) as pair:
        dsn = pair.create_database().replace("postgres@", f"postgres:{PASSWORD}@")
        lengths = mixed_lengths(60, random.Random(33))
        for index in LONG_JOBS:
            lengths[index] = LONG_JOB
        ids = enqueue(dsn, lengths, journal)
        observer = Observer(dsn)
        # Maintenance at its default interval: /readyz must not wait for its next run.
        args = ("--workers", "4", *SETTINGS, "--maintenance-interval", "10", "--metrics-port", "0")
        with Deaths() as deaths, supervisor(dsn, *args) as running:
            deaths.family(running.pid)
            readiness = Readiness(metrics_port(running))
            poller = threading.Thread(target=readiness.poll, daemon=True)
            poller.start()
            wait_for(
                "work under way, with a worker early in a long job",
                lambda: completed(observer) >= 5 and long_job_under_way(journal, running),
                timeout=60,
            )
            before = worker_pids(running)
            observer.close()
            crashed = time.monotonic()
            pair.crash_primary()
            wait_for("/readyz not ready", lambda: 503 in readiness.after(crashed), 30)
            running.wait_for_log("Could not record how attempt", timeout=30)
            titles = list(running.titles().values())
            pair.promote()
            promoted = time.monotonic()
            wait_for("every job to complete", lambda: all_completed(observer, len(ids)), 90)
            drained = time.monotonic()
            wait_for("/readyz ready after the drain", lambda: 200 in readiness.after(drained))
            readiness.stopping.set()
            poller.join(5)
            master_after = running.pid if running.process.poll() is None else -1
            running.signal(signal.SIGTERM)
            assert running.wait(30) == 0, running.log
            records = records_of(observer, ids)
            report = judged(journal, deaths, records)
        observer.close()
        ran_after = {e["pid"] for e in read_journal(journal) if e["mono"] > promoted}
        yield Failover(
            pair, dsn, ids, records, report, readiness, crashed, promoted, drained,
            running.log, (running.pid, master_after), before, ran_after, titles,
        )  # fmt: skip


def test_no_attempts_overlap_and_every_job_completes(failover: Failover) -> None:
    # judged() has asserted the checker's verdict: no overlap, nothing lost.
    assert failover.report.ok, failover.report.summary()
    assert all(record.status is jobq.Status.COMPLETED for record in failover.records)
    assert failover.report.jobs == len(failover.ids)


def test_an_acknowledgement_lost_in_the_switch_lands_on_the_new_primary(
    failover: Failover,
) -> None:
    retried = {(int(job), int(attempt)) for attempt, job in ACK_RETRY.findall(failover.log)}
    given_up = {(int(job), int(attempt)) for attempt, job in GAVE_UP.findall(failover.log)}
    by_id = {record.id: record for record in failover.records}
    landed = [job for job, attempt in retried - given_up if by_id[job].attempts == attempt]
    assert landed, failover.log


def test_the_supervisor_rode_it_out_without_a_restart(failover: Failover) -> None:
    master_before, master_after = failover.masters
    assert master_after == master_before, failover.log
    assert "keep exiting" not in failover.log
    # Synchronous replication: the start had nothing to warn of (test_replication_warning.py).
    assert "may lose commits in a failover" not in failover.log
    # Work resumed on the promoted standby in workers that had lived through the window.
    assert failover.workers_before & failover.ran_after, failover.log


def test_readyz_is_not_ready_in_the_window_and_ready_again_after(failover: Failover) -> None:
    readiness = failover.readiness
    assert 200 in readiness.between(0, failover.crashed), readiness.seen
    assert 503 in readiness.between(failover.crashed, failover.promoted), readiness.seen
    # Ready again while the drain still ran, not only once the housekeeper's next interval
    # came round.
    assert 200 in readiness.between(failover.promoted, failover.drained), readiness.seen


def test_no_log_line_or_process_title_shows_the_password(failover: Failover) -> None:
    assert PASSWORD not in failover.log
    assert failover.titles
    assert not any(PASSWORD in title for title in failover.titles)
    assert "Traceback" not in failover.log


def jobq_cli(dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobq", *args, "--dsn", dsn],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_the_cli_reads_the_promoted_database_through_the_multi_host_dsn(
    failover: Failover,
) -> None:
    stats = jobq_cli(failover.dsn, "stats")
    assert stats.returncode == 0, stats.stderr
    assert "chaos" in stats.stdout, stats.stdout
    assert str(len(failover.ids)) in stats.stdout, stats.stdout
    jobs = jobq_cli(failover.dsn, "jobs", "--limit", "5")
    assert jobs.returncode == 0, jobs.stderr
    assert str(failover.ids[-1]) in jobs.stdout, jobs.stdout


def test_a_cli_error_shows_the_multi_host_dsn_whole_without_its_password(
    failover: Failover,
) -> None:
    missing = failover.dsn.replace("/jobq_test_", "/no_such_")
    result = jobq_cli(missing, "stats")
    assert result.returncode == 1, result.stderr
    hosts = ",".join(f"127.0.0.1:{port}" for port in failover.pair.ports)
    assert f"postgres:***@{hosts}/no_such_" in result.stderr, result.stderr
    assert "target_session_attrs=read-write" in result.stderr, result.stderr
    assert PASSWORD not in result.stderr


def test_jobq_web_serves_the_promoted_database_through_the_multi_host_dsn(
    failover: Failover, tmp_path: Path
) -> None:
    with jobq_web(failover.dsn, cwd=tmp_path) as address:
        url = f"{address.rstrip('/')}/jobs/{failover.ids[0]}"
        with urllib.request.urlopen(url, timeout=30) as page:
            html = page.read().decode()
    assert f"<h1>Job {failover.ids[0]} " in html
