"""Pieces of the history-checked fault runs (tests/system/test_faults.py, test_prefetch.py):
jobs of mixed lengths journalled by the chaos app, waits on their completion, a worker killed
inside a job, and the checker's verdict on a run."""

from __future__ import annotations

import random
import signal
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import psutil

import jobq
from chaos.observe import Deaths, Observer, busy_workers, in_handle
from jobq.records import JobRecord
from jobq.testing.history import Report, check, read_journal
from tests.support.apps.chaos_app import Chaos, ChaosAsync
from tests.support.supervising import FAST, Supervisor, supervisor
from tests.support.waiting import wait_for

SETTINGS = ("--app", "chaos_app", *FAST)


def mixed_lengths(count: int, rng: random.Random) -> list[float]:
    """Mostly short jobs; every 8th a second or so, so that workers are caught inside
    handle(); every 50th a few seconds, so a supervisor killed late still holds one."""
    lengths = []
    for i in range(count):
        if i % 50 == 25:
            lengths.append(rng.uniform(2.5, 3.5))
        elif i % 8 == 0:
            lengths.append(rng.uniform(0.5, 1.2))
        else:
            lengths.append(rng.uniform(0, 0.02))
    return lengths


def enqueue(dsn: str, lengths: list[float], journal: Path) -> list[int]:
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        return [queue.enqueue(Chaos(seconds, str(journal))) for seconds in lengths]


def enqueue_both_kinds(
    dsn: str, lengths: list[float], journal: Path, priority: int = 0
) -> list[int]:
    """Thread and coroutine jobs alternating, so every concurrent worker runs both at once."""
    kinds = (Chaos, ChaosAsync)
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        return [
            queue.enqueue(kinds[n % 2](seconds, str(journal)), priority=priority)
            for n, seconds in enumerate(lengths)
        ]


def completed(observer: Observer) -> int:
    return (observer.counts() or {}).get("completed", 0)


def completed_at_least(observer: Observer, jobs: int) -> bool:
    return completed(observer) >= jobs


def all_completed(observer: Observer, jobs: int) -> bool:
    return observer.counts() == {"completed": jobs}


def settled(observer: Observer, jobs: int) -> bool:
    counts = observer.counts() or {}
    return sum(counts.get(status, 0) for status in ("completed", "failed", "cancelled")) == jobs


def records_of(observer: Observer, ids: list[int]) -> list[JobRecord]:
    def record(job_id: int) -> JobRecord:
        return wait_for(
            f"job {job_id} to be read", lambda: observer.read(lambda queue: queue.get(job_id))
        )

    return [record(job_id) for job_id in ids]


def judged(
    journal: Path, deaths: Deaths, records: list[JobRecord], limit: int | None = None
) -> Report:
    entries = read_journal(journal)
    exits = deaths.exits_for(entries)
    if limit is not None:
        # A killed attempt's slot goes to the next job of its key as soon as its master sees
        # the death, which may be before this process's watcher does; the attempt ran none
        # of its code after the SIGKILL was sent, so that is when it ended.
        exits = {pid: min(seen, deaths.killed.get(pid, seen)) for pid, seen in exits.items()}
    report = check(entries, records, exits, limit)
    print(report.summary())  # shown with -s, or when the test fails
    assert report.ok, report.summary()
    assert report.jobs == len(records)
    # A worker killed between its claim and its first journal line ran an attempt the
    # database counted and the journal never saw; never the other way round.
    assert report.attempts_counted >= report.attempts_run, report.summary()
    return report


def worker_pids(running: Supervisor) -> set[int]:
    try:
        return {w.pid for w in running.workers()}
    except psutil.Error:
        return set()


def busy(running: list[Supervisor]) -> set[int]:
    return {pid for s in running for pid in busy_workers(s.pid)}


def ended(entries: list[dict[str, Any]], start: Mapping[str, Any]) -> bool:
    key = (start["job"], start["attempt"], start["pid"])
    return any((e["job"], e["attempt"], e["pid"]) == key for e in entries if e["event"] == "end")


def kill_a_busy_worker(
    observer: Observer,
    journal: Path,
    deaths: Deaths,
    running: list[Supervisor],
    rng: random.Random,
) -> Mapping[str, Any]:
    """SIGKILL a worker (of any of `running`) inside a job's handle(), then see the master
    fail that attempt at once: by the text a dying worker's attempt gets from its master,
    not the lease-expiry text of maintenance, which could only act a lease later."""
    while True:
        victims = wait_for(
            "a worker inside a job",
            lambda: in_handle(read_journal(journal), busy(running), at_least=0.3),
            timeout=30,
        )
        victim = rng.choice(victims)
        deaths.kill(victim["pid"])
        assert deaths.wait_gone([victim["pid"]], timeout=5), f"worker {victim['pid']} survived"
        if not ended(read_journal(journal), victim):
            break
        # The job ended first after all (a loaded machine): that kill hit an idle worker.
    job, pid = victim["job"], victim["pid"]
    failed_by_master = f"The worker died (worker {pid}, signal SIGKILL)"

    def failed() -> JobRecord | None:
        record = observer.read(lambda queue: queue.get(job))
        return record if record and failed_by_master in (record.last_error or "") else None

    record = wait_for(f"attempt {victim['attempt']} of job {job} to be failed", failed, 15)
    assert record.attempts >= victim["attempt"]
    assert record.status is not jobq.Status.FAILED, "a killed attempt must be retried"
    return victim


@contextmanager
def doomed_and_survivor(dsn: str, deaths: Deaths) -> Iterator[tuple[Supervisor, Supervisor]]:
    """Two supervisors of three workers sharing the database, both watched by `deaths`: one
    to be killed whole, one to finish the work."""
    with (
        supervisor(dsn, "--workers", "3", *SETTINGS) as doomed,
        supervisor(dsn, "--workers", "3", *SETTINGS) as survivor,
    ):
        deaths.family(doomed.pid)
        deaths.family(survivor.pid)
        yield doomed, survivor


def kill_busy_workers(
    observer: Observer,
    journal: Path,
    deaths: Deaths,
    running: list[Supervisor],
    rng: random.Random,
    kills: int,
    every: int,
) -> list[Mapping[str, Any]]:
    """`kills` workers SIGKILLed inside jobs, one each `every` jobs completed: spread over the
    run rather than all at its start."""
    victims = []
    for n in range(1, kills + 1):
        wait_for(f"{every * n} jobs done", partial(completed_at_least, observer, every * n), 60)
        victims.append(kill_a_busy_worker(observer, journal, deaths, running, rng))
    return victims


def kill_inside_a_job(
    doomed: Supervisor, deaths: Deaths, journal: Path, at_least: float
) -> list[int]:
    """SIGKILL a whole supervisor once one of its workers is `at_least` seconds inside a job;
    returns its family's pids, all gone."""
    wait_for(
        "a worker of the doomed supervisor inside a job",
        lambda: in_handle(read_journal(journal), worker_pids(doomed), at_least=at_least),
        timeout=60,
    )
    deaths.refresh()
    family = [doomed.pid, *(p.pid for p in psutil.Process(doomed.pid).children(True))]
    doomed.signal(signal.SIGKILL)
    # PR_SET_PDEATHSIG: the kernel takes every child with the master, at once.
    assert deaths.wait_gone(family, timeout=5), "a child outlived its SIGKILLed master"
    return family
