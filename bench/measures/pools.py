"""Pickup latency beside a backlog of long jobs (issue 32): short jobs at a steady rate while
long ones fill the queue, served once by one pool of W workers for both types and once by two
pools of W/2 workers each (`--pool sleep:W/2 --pool stamp:W/2`).

The long jobs are enqueued after the warm-up, ahead of every short one, two per worker, and
each outlasts the stream: one pool's workers all take long jobs, and the short ones wait
behind the backlog; a pool of their own picks them up as idle workers do (latency.py). The
table gives what each run measured; no figure is asserted anywhere.
"""

from __future__ import annotations

import asyncio
import signal

import jobq

from ..harness.app import Sleep, Stamp
from ..harness.context import REPO, Bench
from ..harness.jobqdb import JobqDb, supervise_cmd
from ..harness.results import Latency
from .latency import paced, summarize

LONG_PER_WORKER = 2


def layouts(workers: int) -> list[tuple[str, tuple[str, ...]]]:
    """(name, supervisor options) of the two runs, with as many workers in all."""
    half = max(1, workers // 2)
    return [
        ("one pool", ("--workers", str(workers))),
        ("a pool each", ("--pool", f"sleep:{half}", "--pool", f"stamp:{workers - half or 1}")),
    ]


def starved(bench: Bench, dsn: str, name: str, sizing: tuple[str, ...]) -> Latency:
    workers = bench.settings.latency_workers
    seconds = bench.settings.latency_seconds + 5  # longer than the stream
    path = bench.tmp / f"pools-{name.replace(' ', '-')}.txt"
    backlog = LONG_PER_WORKER * workers
    result = Latency(f"jobq, {name}", f"{' '.join(sizing)}; {backlog} jobs of {seconds:g} s first")
    db = JobqDb(dsn)
    db.reset()
    proc = bench.procs.spawn(
        f"jobq-pools-{name.replace(' ', '-')}",
        supervise_cmd(dsn, None, *sizing, "--poll-interval", "3600"),
        env=bench.env(BENCH_LATENCY_FILE=str(path)),
        cwd=REPO,
    )
    producer = jobq.Queue.connect(dsn)

    async def enqueue(index: int, sent: float) -> None:
        producer.enqueue(Stamp(index, sent))

    def fill() -> None:
        producer.enqueue_many([Sleep(seconds) for _ in range(backlog)])

    try:
        returned = asyncio.run(
            paced(bench, enqueue, path, workers, lambda: proc.poll() is None, fill)
        )
    finally:
        producer.close()
        bench.procs.stop(proc, signal.SIGQUIT, grace=30.0)  # the long jobs need not finish
        db.close()
    return summarize(result, path, returned)
