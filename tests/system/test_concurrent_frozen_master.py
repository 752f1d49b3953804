"""A frozen master under --concurrency 20: while it is stopped (SIGSTOP), its worker's
leases go unrenewed, its fence keeper kills the worker, the leases lapse and another
supervisor takes the jobs over; thawed (SIGCONT), the master settles nothing that is no longer
its own. The history checker judges the whole run: nothing lost, no two attempts of one job
overlapping. No --job-timeout here: nothing but the lease may stop an attempt, so the freeze
is what ends those that outlive it (test_concurrent_worker.py covers the timeout)."""

from __future__ import annotations

import random
import signal
from functools import partial
from pathlib import Path

import pytest

import jobq
from chaos.observe import Deaths, Observer
from jobq.outcomes import LEASE_EXPIRED
from jobq.testing.history import read_journal
from tests.support.faults import (
    SETTINGS,
    enqueue_both_kinds,
    judged,
    mixed_lengths,
    records_of,
    settled,
)
from tests.support.supervising import supervisor
from tests.support.waiting import wait_for

# Longer than FAST's 6 s lease: only renewals keep such an attempt alive.
OUTLIVES_LEASE = 7.0
ONE_WORKER = ("--workers", "1", "--concurrency", "20")


def started(journal: Path, ids: list[int]) -> dict[int, int]:
    """{job: pid} of the first start of each of `ids` journaled so far."""
    pids: dict[int, int] = {}
    for entry in read_journal(journal):
        if entry["event"] == "start" and entry["job"] in ids:
            pids.setdefault(entry["job"], entry["pid"])
    return pids


def lapsed(observer: Observer, ids: list[int]) -> bool:
    """Whether every one of `ids` had an attempt failed by its lease running out."""
    records = observer.read(lambda queue: [queue.get(job_id) for job_id in ids])
    return records is not None and all(
        record is not None and any(LEASE_EXPIRED in (e.error or "") for e in record.history)
        for record in records
    )


@pytest.mark.databases("postgresql", "sqlite", "mariadb")
def test_a_frozen_master_s_attempts_lapse_and_are_taken_over_without_overlap_or_loss(
    dsn: str, tmp_path: Path
) -> None:
    rng = random.Random(2727)
    journal = tmp_path / "journal"
    # Claimed first, by the master about to be frozen: its one worker holds them all.
    outliving = enqueue_both_kinds(dsn, [OUTLIVES_LEASE] * 4, journal, priority=10)
    ids = [*outliving, *enqueue_both_kinds(dsn, mixed_lengths(120, rng), journal)]
    observer = Observer(dsn)
    with Deaths() as deaths, supervisor(dsn, *ONE_WORKER, *SETTINGS) as frozen:
        deaths.family(frozen.pid)
        pids = wait_for("the long jobs to start", lambda: (
            found if len(found := started(journal, outliving)) == len(outliving) else None
        ), 60)  # fmt: skip
        worker = set(pids.values())
        assert len(worker) == 1, pids
        frozen.signal(signal.SIGSTOP)
        try:
            with supervisor(dsn, "--workers", "2", "--concurrency", "20", *SETTINGS) as other:
                deaths.family(other.pid)
                # The frozen master's fence keeper kills its worker; once the leases run out,
                # the other supervisor's maintenance fails those attempts and its workers
                # take the jobs over.
                wait_for("the long jobs' leases to lapse", partial(lapsed, observer, outliving), 60)
                frozen.signal(signal.SIGCONT)
                wait_for("every job to settle", partial(settled, observer, len(ids)), 120)
                other.signal(signal.SIGTERM)
                assert other.wait(30) == 0, other.log
        finally:
            frozen.signal(signal.SIGCONT)
        frozen.signal(signal.SIGTERM)
        assert frozen.wait(30) == 0, frozen.log
        records = records_of(observer, ids)
        report = judged(journal, deaths, records)
    observer.close()
    assert {record.status for record in records} == {jobq.Status.COMPLETED}, report.summary()
    (pid,) = worker
    assert f"was not renewed in time: killed worker {pid}" in frozen.log, frozen.log
    for record in records[: len(outliving)]:
        assert record.attempts >= 2, record
