"""The peers: pgqueuer and procrastinate, each in its own database on the same server.

Each drains the same number of no-op jobs with W worker processes, first with its documented
defaults, then with the setting that does best on this load, picked by a short sweep in the
same run (batch size for pgqueuer, async concurrency per process for procrastinate).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import signal
import time
from abc import ABC, abstractmethod
from typing import Any

import psycopg

from ..harness.context import PYTHON, REPO, Bench
from ..harness.cpu import Meter
from ..harness.jobqdb import wait_drained
from ..harness.results import Drain

# Candidates for "best": pgqueuer's default batch is 10 jobs per dequeue; procrastinate runs
# one job at a time per worker by default. Larger values trade latency and fairness for
# fewer round trips per job, which is what a drain of no-op jobs rewards.
PGQ_BATCHES = (10, 50, 200)
PROC_CONCURRENCY = (1, 8, 32)
CHUNK = 1000  # jobs per enqueue statement while preloading


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
    async def preload(self, jobs: int) -> None: ...

    @abstractmethod
    def remaining(self) -> int: ...

    def completion(self) -> tuple[int, int, float]:
        """(completed, completed after the first completion time, first-to-last span in s)."""
        row = self.conn.execute(self.completion_sql()).fetchone()
        assert row is not None
        return int(row[0]), int(row[1] or 0), float(row[2] or 0.0)

    @abstractmethod
    def completion_sql(self) -> str: ...

    @abstractmethod
    def worker_cmd(self, setting: int, drain: bool) -> tuple[list[str], dict[str, str]]:
        """The command of one worker process with this setting, and its extra environment."""

    @abstractmethod
    def describe(self, setting: int) -> str: ...

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

    def drain(self, workers: int, jobs: int, setting: int, variant: str) -> Drain:
        result = Drain(self.name, variant, "postgresql", workers, jobs)
        result.settings = f"{workers} processes, {self.describe(setting)}"
        self.reset()
        asyncio.run(self.preload(jobs))
        self.settle()
        result.load = os.getloadavg()[0]
        started = time.monotonic()
        procs = []
        for i in range(workers):
            cmd, extra = self.worker_cmd(setting, drain=True)
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
        _, result.note, result.window_jobs = wait_drained(
            self.remaining, jobs, gone, self.bench.settings.drain_timeout(jobs), meter
        )
        result.client_cpu, _, result.db_cpu = meter.results()
        result.wall = time.monotonic() - started
        # Drain mode ends each worker once the queue is empty; acknowledgements still
        # buffered are flushed on the way out, so wait for the exits, then read the times.
        self.bench.procs.wait_all(procs, 30.0)
        for proc in procs:
            self.bench.procs.stop(proc, signal.SIGTERM, grace=10.0)
        result.completed, result.after_first, result.span = self.completion()
        return result


class Pgqueuer(Peer):
    name = "pgqueuer"
    package = "pgqueuer"

    def install(self) -> None:
        async def go() -> None:
            import asyncpg
            from pgqueuer import AsyncpgDriver, Queries

            connection = await asyncpg.connect(self.dsn)
            try:
                await Queries(AsyncpgDriver(connection)).install()
            finally:
                await connection.close()

        asyncio.run(go())

    async def preload(self, jobs: int) -> None:
        import asyncpg
        from pgqueuer import AsyncpgDriver, Queries

        connection = await asyncpg.connect(self.dsn)
        try:
            queries = Queries(AsyncpgDriver(connection))
            left = jobs
            while left > 0:
                n = min(CHUNK, left)
                await queries.enqueue(["noop"] * n, [None] * n, [0] * n)
                left -= n
        finally:
            await connection.close()

    def remaining(self) -> int:
        return int(self.scalar("SELECT count(*) FROM pgqueuer"))

    def completion_sql(self) -> str:
        # One log row per job, written when the acknowledgement buffer is flushed.
        return (
            "WITH done AS (SELECT created AS at FROM pgqueuer_log WHERE status = 'successful') "
            "SELECT count(*), count(*) FILTER (WHERE at > (SELECT min(at) FROM done)), "
            "extract(epoch FROM max(at) - min(at)) FROM done"
        )

    def worker_cmd(self, setting: int, drain: bool) -> tuple[list[str], dict[str, str]]:
        # `pgq run` itself fails to start in pgqueuer 1.6.0: see pgq_worker.py.
        mode = "drain" if drain else "continuous"
        cmd = [PYTHON, "-m", "bench.peers.pgq_worker", str(setting), mode]
        return cmd, {"BENCH_PGQ_DSN": self.dsn}

    def describe(self, setting: int) -> str:
        return f"batch_size={setting} (pgqueuer.run, asyncpg driver)"

    def default_setting(self) -> int:
        return 10

    def candidates(self) -> tuple[int, ...]:
        return PGQ_BATCHES

    def one_at_a_time(self) -> int | None:
        # A batch of 1: one job per dequeue statement, and an acknowledgement buffer that
        # flushes at every job (its size is the batch size). The event loop may still start
        # the next dequeue before the previous job's acknowledgement is flushed.
        return 1

    async def open_producer(self) -> Any:
        import asyncpg
        from pgqueuer import AsyncpgDriver, Queries

        connection = await asyncpg.connect(self.dsn)
        return connection, Queries(AsyncpgDriver(connection))

    async def enqueue_stamp(self, producer: Any, index: int, sent: float) -> None:
        await producer[1].enqueue("stamp", json.dumps({"index": index, "sent": sent}).encode())

    async def close_producer(self, producer: Any) -> None:
        await producer[0].close()


class Procrastinate(Peer):
    name = "procrastinate"
    package = "procrastinate"

    def app(self) -> Any:
        os.environ["BENCH_PROC_DSN"] = self.dsn
        from . import proc_app

        return proc_app.app

    def install(self) -> None:
        app = self.app()

        async def go() -> None:
            async with app.open_async():
                await app.schema_manager.apply_schema_async()

        asyncio.run(go())

    async def preload(self, jobs: int) -> None:
        app = self.app()
        async with app.open_async():
            task = app.tasks["noop"]
            left = jobs
            while left > 0:
                n = min(CHUNK, left)
                await task.batch_defer_async(*({} for _ in range(n)))
                left -= n

    def remaining(self) -> int:
        return int(
            self.scalar("SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')")
        )

    def completion_sql(self) -> str:
        return (
            "WITH done AS (SELECT at FROM procrastinate_events WHERE type = 'succeeded') "
            "SELECT count(*), count(*) FILTER (WHERE at > (SELECT min(at) FROM done)), "
            "extract(epoch FROM max(at) - min(at)) FROM done"
        )

    def worker_cmd(self, setting: int, drain: bool) -> tuple[list[str], dict[str, str]]:
        cmd = [
            PYTHON, "-m", "procrastinate", "--app", "bench.peers.proc_app.app", "worker",
            "--concurrency", str(setting), "--one-shot" if drain else "--wait",
        ]  # fmt: skip
        extra = {"BENCH_PROC_DSN": self.dsn}
        if setting != self.default_setting():
            # One connection per concurrent job, one for LISTEN, one spare.
            extra["BENCH_PROC_POOL"] = str(setting + 2)
        return cmd, extra

    def describe(self, setting: int) -> str:
        pool = "default pool" if setting == self.default_setting() else f"pool {setting + 2}"
        return f"procrastinate worker --concurrency {setting} ({pool}, async task)"

    def default_setting(self) -> int:
        return 1

    def candidates(self) -> tuple[int, ...]:
        return PROC_CONCURRENCY

    async def open_producer(self) -> Any:
        app = self.app()
        await app.open_async()
        return app

    async def enqueue_stamp(self, producer: Any, index: int, sent: float) -> None:
        await producer.tasks["stamp"].defer_async(index=index, sent=sent)

    async def close_producer(self, producer: Any) -> None:
        await producer.close_async()


PEERS: tuple[type[Peer], ...] = (Pgqueuer, Procrastinate)
