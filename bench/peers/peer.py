"""What the bench asks of a peer queue (pgqueuer, procrastinate), each in its own database
on the same server.

Each drains the same number of no-op jobs with W worker processes, first with its documented
defaults, then with the setting that does best on this load, picked by a short sweep in the
same run (batch size for pgqueuer, async concurrency per process for procrastinate).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import signal
import time
from abc import ABC, abstractmethod
from typing import Any

import psycopg

from ..harness.context import REPO, Bench
from ..harness.cpu import Meter
from ..harness.jobqdb import wait_drained
from ..harness.memory import PeakMemory
from ..harness.results import Drain

CHUNK = 1000  # jobs per enqueue statement while preloading

# (completed, completed after the first completion time, first-to-last span in s) from a
# peer's own completion times, one row per completed job (see Peer.done).
COMPLETION = (
    "WITH done AS ({done}) "
    "SELECT count(*), count(*) FILTER (WHERE at > (SELECT min(at) FROM done)), "
    "extract(epoch FROM max(at) - min(at)) FROM done"
)


def installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


class Peer(ABC):
    name: str
    package: str

    def __init__(self, bench: Bench, dsn: str) -> None:
        self.bench = bench
        self.dsn = dsn
        self.conn = psycopg.connect(dsn, autocommit=True)

    def close(self) -> None:
        self.conn.close()

    def scalar(self, sql: str) -> Any:
        row = self.conn.execute(sql).fetchone()
        assert row is not None
        return row[0]

    def tables(self) -> list[str]:
        rows = self.conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE %s",
            (self.name + "%",),
        ).fetchall()
        return [str(r[0]) for r in rows]

    def reset(self) -> None:
        names = ", ".join(self.tables())
        self.conn.execute(f"TRUNCATE {names} RESTART IDENTITY CASCADE")

    def settle(self) -> None:
        for table in self.tables():
            self.conn.execute(f"VACUUM ANALYZE {table}")
        self.conn.execute("CHECKPOINT")

    @abstractmethod
    def install(self) -> None: ...

    @abstractmethod
    async def preload(self, jobs: int, work: str) -> None:
        """`jobs` jobs of the app's task `work`: "noop", or "wait" (the I/O section's)."""

    @abstractmethod
    def remaining(self) -> int: ...

    def completion(self) -> tuple[int, int, float]:
        """(completed, completed after the first completion time, first-to-last span in s)."""
        row = self.conn.execute(COMPLETION.format(done=self.done())).fetchone()
        assert row is not None
        return int(row[0]), int(row[1] or 0), float(row[2] or 0.0)

    @abstractmethod
    def done(self) -> str:
        """A query of the completed jobs' completion times, one row each, as `at`."""

    @abstractmethod
    def worker_cmd(
        self, setting: int, drain: bool, concurrency: int | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """The command of one worker process with this setting, and its extra environment;
        `concurrency` caps the jobs it runs at once where the setting itself does not."""

    @abstractmethod
    def describe(self, setting: int, concurrency: int | None = None) -> str: ...

    @abstractmethod
    def default_setting(self) -> int: ...

    @abstractmethod
    def candidates(self) -> tuple[int, ...]: ...

    def one_at_a_time(self) -> int | None:
        """The setting under which the peer, like jobq, takes one job per claim statement and
        acknowledges each job on its own, when that differs from its default."""
        return None

    @abstractmethod
    async def open_producer(self) -> Any: ...

    @abstractmethod
    async def enqueue_stamp(self, producer: Any, index: int, sent: float) -> None: ...

    @abstractmethod
    async def close_producer(self, producer: Any) -> None: ...

    def drain(
        self,
        workers: int,
        jobs: int,
        setting: int,
        variant: str,
        work: str = "noop",
        concurrency: int | None = None,
    ) -> Drain:
        result = Drain(self.name, variant, "postgresql", workers, jobs)
        result.settings = f"{workers} processes, {self.describe(setting, concurrency)}"
        self.reset()
        asyncio.run(self.preload(jobs, work))
        self.settle()
        result.load = os.getloadavg()[0]
        started = time.monotonic()
        procs = []
        for i in range(workers):
            cmd, extra = self.worker_cmd(setting, drain=True, concurrency=concurrency)
            procs.append(
                self.bench.procs.spawn(
                    f"{self.name}-{variant}-w{workers}-{i}", cmd, env=self.bench.env(**extra),
                    cwd=REPO,
                )
            )  # fmt: skip

        def gone() -> str:
            if all(p.poll() is not None for p in procs):
                return f"workers exited with jobs left (see {self.bench.procs.log_of(procs[0])})"
            return ""

        assert self.bench.pg is not None
        meter = Meter([p.pid for p in procs], self.bench.pg.data)
        with PeakMemory([p.pid for p in procs]) as memory:
            _, result.note, result.window_jobs = wait_drained(self.remaining, jobs, gone, meter)
        result.memory = memory.summary
        result.client_cpu, _, result.db_cpu = meter.results()
        result.wall = time.monotonic() - started
        # Drain mode ends each worker once the queue is empty; acknowledgements still
        # buffered are flushed on the way out, so wait for the exits, then read the times.
        self.bench.procs.wait_all(procs, 30.0)
        for proc in procs:
            self.bench.procs.stop(proc, signal.SIGTERM, grace=10.0)
        result.completed, result.after_first, result.span = self.completion()
        return result
