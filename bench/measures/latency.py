"""Enqueue-to-start latency at a low steady rate, with idle workers woken by LISTEN/NOTIFY.

Workers are started and warmed up first, so every measured job finds them idle and blocked on
their notification wait; jobq's poll interval is set far longer than the run, so any pickup
within it came from a NOTIFY. The job records time.time() when its handler starts; the bench
records it just before the enqueue call and just after it returned (the commit, after which
the NOTIFY is delivered). Both are on this machine's one clock.
"""

from __future__ import annotations

import asyncio
import signal
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import jobq

from ..harness.app import Stamp
from ..harness.context import REPO, Bench
from ..harness.jobqdb import JobqDb, supervise_cmd
from ..harness.results import Latency
from ..peers.peer import Peer

WARMUP = -1  # indices below zero are warm-up jobs, not measured


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def read_starts(path: Path) -> dict[int, tuple[float, float]]:
    starts: dict[int, tuple[float, float]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            index, sent, started = line.split()
            starts[int(index)] = (float(sent), float(started))
    return starts


async def paced(
    bench: Bench,
    enqueue: Callable[[int, float], Awaitable[None]],
    path: Path,
    workers: int,
    alive: Callable[[], bool],
    before: Callable[[], None] = lambda: None,
) -> dict[int, float]:
    """Warm up, call `before`, then enqueue at the configured rate; returns {index: time
    enqueue returned}. Gives up early (returning what it sent) once `alive()` says the
    workers are gone."""
    # Warm-up: one job per worker, so every worker has connected, claimed, and gone idle.
    for i in range(workers):
        await enqueue(WARMUP - i, time.time())
        await asyncio.sleep(0.05)
    deadline = time.monotonic() + 60
    while len([i for i in read_starts(path) if i < 0]) < workers:
        if time.monotonic() > deadline or not alive():
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)  # let every worker settle back into its wait
    before()
    interval = 1.0 / bench.settings.latency_rate
    count = int(bench.settings.latency_rate * bench.settings.latency_seconds)
    returned: dict[int, float] = {}
    start = time.monotonic()
    for i in range(count):
        if not alive():
            break
        delay = start + i * interval - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        sent = time.time()
        await enqueue(i, sent)
        returned[i] = time.time()
    # Bounded wait for the last pickups.
    deadline = time.monotonic() + 30
    while len([i for i in read_starts(path) if i >= 0]) < len(returned) and alive():
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    return returned


def summarize(result: Latency, path: Path, returned: dict[int, float]) -> Latency:
    starts = read_starts(path)
    result.sent = len(returned)
    for index, done in sorted(returned.items()):
        if index in starts:
            sent, started = starts[index]
            result.samples.append(started - sent)
            result.after_commit.append(started - done)
    missing = result.sent - len(result.samples)
    if missing:
        result.note = f"{missing} of {result.sent} jobs did not start within 30 s"
    if result.sent == 0:
        result.note = "no job was sent: the workers did not start (see the logs)"
    return result


def jobq_latency(bench: Bench, dsn: str) -> Latency:
    workers = bench.settings.latency_workers
    path = bench.tmp / "latency-jobq.txt"
    result = Latency(
        "jobq",
        f"jobq-supervise --workers {workers} --poll-interval 3600 (LISTEN/NOTIFY wake-ups)",
    )
    db = JobqDb(dsn)
    db.reset()
    proc = bench.procs.spawn(
        "jobq-latency",
        supervise_cmd(dsn, workers, "--poll-interval", "3600"),
        env=bench.env(BENCH_LATENCY_FILE=str(path)),
        cwd=REPO,
    )
    # The producer's own autocommit connection, as an application's would be.
    producer = jobq.Queue.connect(dsn)

    async def enqueue(index: int, sent: float) -> None:
        producer.enqueue(Stamp(index, sent))

    try:
        returned = asyncio.run(paced(bench, enqueue, path, workers, lambda: proc.poll() is None))
    finally:
        producer.close()
        bench.procs.stop(proc, signal.SIGTERM, grace=30.0)
        db.close()
    return summarize(result, path, returned)


def peer_latency(bench: Bench, peer: Peer) -> Latency:
    workers = bench.settings.latency_workers
    path = bench.tmp / f"latency-{peer.name}.txt"
    setting = peer.default_setting()
    result = Latency(peer.name, f"{workers} processes, {peer.describe(setting)}, defaults")
    peer.reset()
    procs = []
    for i in range(workers):
        cmd, extra = peer.worker_cmd(setting, drain=False)
        env = bench.env(BENCH_LATENCY_FILE=str(path), **extra)
        procs.append(bench.procs.spawn(f"{peer.name}-latency-{i}", cmd, env=env, cwd=REPO))

    async def run() -> dict[int, float]:
        producer = await peer.open_producer()
        try:

            async def enqueue(index: int, sent: float) -> None:
                await peer.enqueue_stamp(producer, index, sent)

            return await paced(
                bench, enqueue, path, workers, lambda: any(p.poll() is None for p in procs)
            )
        finally:
            await peer.close_producer(producer)

    try:
        returned = asyncio.run(run())
    finally:
        for proc in procs:
            bench.procs.stop(proc, signal.SIGTERM, grace=15.0)
    return summarize(result, path, returned)
