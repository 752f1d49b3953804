"""A concurrency limit holds across two supervisors and a `jobq work` process on one
database, through SIGKILLed workers and a SIGKILLed master: judged from every attempt's
journal, no key ever ran more attempts at once than its limit, and nothing was lost."""

from __future__ import annotations

import random
import sys
from functools import partial
from pathlib import Path

import jobq
from chaos.observe import Deaths, Observer
from jobq.testing.history import read_journal
from tests.support.apps.chaos_app import ChaosLimited
from tests.support.faults import (
    all_completed,
    doomed_and_survivor,
    judged,
    kill_busy_workers,
    records_of,
)
from tests.support.supervising import Supervisor
from tests.support.waiting import wait_for

JOBS = 48
KEYS = 4
LIMIT = 2


def length(i: int, rng: random.Random) -> float:
    """Every third job long enough for a worker to be caught inside it."""
    return rng.uniform(0.8, 1.2) if i % 3 == 0 else rng.uniform(0.05, 0.3)


def test_no_key_runs_beyond_its_limit_through_killed_workers_and_a_killed_master(
    dsn: str, tmp_path: Path
) -> None:
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
    with Deaths() as deaths, doomed_and_survivor(dsn, deaths) as (doomed, survivor):
        plain = Supervisor(dsn, ["--lease", "6", "--poll-interval", "0.2"], command=work)
        try:
            deaths.family(plain.pid)
            running = [doomed, survivor]
            kill_busy_workers(observer, journal, deaths, running, rng, kills=2, every=6)
            deaths.kill(doomed.pid)
            wait_for("every job completed", partial(all_completed, observer, JOBS), 90)
        finally:
            plain.stop()
    entries = read_journal(journal)
    assert {entry.get("key") for entry in entries} == {f"k{i}" for i in range(KEYS)}
    report = judged(journal, deaths, records_of(observer, ids), limit=LIMIT)
    assert report.jobs == JOBS
