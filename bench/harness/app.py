"""The jobq application the bench's supervisors run (`--app bench.harness.app`)."""

from __future__ import annotations

import asyncio
import os
import time

import jobq

# What each job of the I/O section waits (bench/measures/iobound.py): an HTTP call's time.
IO_WAIT = 0.1


def record_start(index: int, sent: float) -> None:
    """Append "index sent started" to $BENCH_LATENCY_FILE.

    One short O_APPEND write per line, so lines from many worker processes never interleave,
    and nothing is buffered in a process that the bench may stop at any moment.
    """
    started = time.time()
    path = os.environ.get("BENCH_LATENCY_FILE")
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{index} {sent:.6f} {started:.6f}\n".encode())
    finally:
        os.close(fd)


@jobq.on_worker_start
def trace_if_asked() -> None:
    """With BENCH_TRACING set, trace every attempt as an application would, with an SDK tracer
    provider, but export nothing: what the drain then measures is the spans' own cost."""
    if os.environ.get("BENCH_TRACING"):
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider

        trace.set_tracer_provider(TracerProvider())


class Noop(jobq.Job):
    """Does nothing: what is left is the queue's own cost per job."""

    job_name = "bench.Noop"
    type = "noop"

    def handle(self) -> None:
        return None


class Stamp(jobq.Job):
    """Records when it started, against the wall-clock time it was enqueued."""

    job_name = "bench.Stamp"
    type = "stamp"

    def __init__(self, index: int, sent: float) -> None:
        self.index = index
        self.sent = sent

    def handle(self) -> None:
        record_start(self.index, self.sent)


class Sleep(jobq.Job):
    """A long job, so the master has leases to renew while its children are busy."""

    job_name = "bench.Sleep"
    type = "sleep"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def handle(self) -> None:
        time.sleep(self.seconds)


class Wait(jobq.Job):
    """Blocks for IO_WAIT as a blocking client library would: a process of its own, or a
    thread of a worker's pool with --concurrency."""

    job_name = "bench.Wait"
    type = "wait"

    def handle(self) -> None:
        time.sleep(IO_WAIT)


class AsyncHold(jobq.Job):
    """Awaits `seconds` on the worker's event loop: an attempt held in flight while the
    bench reads the worker's memory."""

    job_name = "bench.AsyncHold"
    type = "hold"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def handle(self) -> None:
        await asyncio.sleep(self.seconds)


class AsyncWait(jobq.Job):
    """Awaits IO_WAIT on the worker's event loop, as pgqueuer's and procrastinate's do."""

    job_name = "bench.AsyncWait"
    type = "wait"

    async def handle(self) -> None:
        await asyncio.sleep(IO_WAIT)


class Keyed(jobq.Job):
    """A no-op with a key, unlimited: the limits section's baseline (measures/key_limits.py)."""

    job_name = "bench.Keyed"
    type = "keyed"

    def __init__(self, key: int) -> None:
        self.key = key

    def handle(self) -> None:
        return None


class KeyedLimited(Keyed):
    """The same no-op, at most one attempt of a key at once."""

    job_name = "bench.KeyedLimited"
    type = "keyed-limited"
    concurrency = jobq.Concurrency(1, key=lambda job: job.key)


# Issue 56's per-step cost: one job's ten pieces, each returning at once, as durable
# steps or as plain calls (the same body without steps).
STEPS = 10


def piece(n: int) -> int:
    return n


class TenSteps(jobq.Job):
    job_name = "bench.TenSteps"
    type = "noop"

    def handle(self) -> int:
        return sum(jobq.step(f"s{n}", piece, n) for n in range(STEPS))


class TenPlain(jobq.Job):
    job_name = "bench.TenPlain"
    type = "noop"

    def handle(self) -> int:
        return sum(piece(n) for n in range(STEPS))


class Asleep(Sleep):
    """Sleeps durably: its attempt ends and frees the worker until the sleep is over."""

    job_name = "bench.Asleep"
    type = "noop"

    def handle(self) -> None:
        jobq.sleep(self.seconds)
