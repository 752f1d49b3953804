"""Many processes claiming from one queue: each job runs once, none is lost."""

from __future__ import annotations

import multiprocessing
import os
from collections import Counter
from pathlib import Path

import pytest

import jobq

PROCESSES = 6
JOBS = 300


class Tally(jobq.Job):
    """Appends its number and the running pid to a shared journal file."""

    type = "tally"

    def __init__(self, number: int, journal: str) -> None:
        self.number = number
        self.journal = journal

    def handle(self) -> None:
        # One short O_APPEND write per job: lines from different processes never interleave.
        with open(self.journal, "a") as journal:
            journal.write(f"{self.number} {os.getpid()}\n")


def drain(dsn: str, start: multiprocessing.synchronize.Event, types: list[str] | None) -> None:
    with jobq.Queue.connect(dsn, lease_duration=120) as queue:
        start.wait(timeout=30)
        while queue.process_next(types):
            pass


# Claims of any type, and of several types: one locked probe per type, merged.
@pytest.mark.parametrize("types", [None, ["other", "tally"]], ids=["any type", "two types"])
def test_concurrent_workers_run_every_job_exactly_once(
    dsn: str, tmp_path: Path, types: list[str] | None
) -> None:
    journal = tmp_path / "journal"
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        for number in range(JOBS):
            queue.enqueue(Tally(number, str(journal)), type="other" if number % 2 else None)

    context = multiprocessing.get_context("fork")
    start = context.Event()
    workers = [context.Process(target=drain, args=(dsn, start, types)) for _ in range(PROCESSES)]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0] * PROCESSES

    runs = [line.split() for line in journal.read_text().splitlines()]
    per_job = Counter(int(number) for number, _ in runs)
    assert per_job == Counter(range(JOBS)), "every job ran, and ran once"
    assert len({pid for _, pid in runs}) > 1, "the work was shared between processes"
    with jobq.Queue.connect(dsn) as queue:
        assert queue.counts() == {"completed": JOBS}
        attempts = {queue.get(job_id).attempts for job_id in range(1, JOBS + 1)}  # type: ignore[union-attr]
        assert attempts == {1}
