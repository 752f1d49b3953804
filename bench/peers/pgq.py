"""pgqueuer as the bench drives it: its schema, a preload, and `pgqueuer.run` workers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ..harness.context import PYTHON
from .peer import CHUNK, Peer

# Candidates for "best": pgqueuer's default batch is 10 jobs per dequeue. Larger batches
# trade latency and fairness for fewer round trips per job, which a drain of no-op jobs
# rewards.
PGQ_BATCHES = (10, 50, 200)


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

    async def preload(self, jobs: int, work: str) -> None:
        import asyncpg
        from pgqueuer import AsyncpgDriver, Queries

        connection = await asyncpg.connect(self.dsn)
        try:
            queries = Queries(AsyncpgDriver(connection))
            left = jobs
            while left > 0:
                n = min(CHUNK, left)
                await queries.enqueue([work] * n, [None] * n, [0] * n)
                left -= n
        finally:
            await connection.close()

    def remaining(self) -> int:
        return int(self.scalar("SELECT count(*) FROM pgqueuer"))

    def done(self) -> str:
        # One log row per job, written when the acknowledgement buffer is flushed.
        return "SELECT created AS at FROM pgqueuer_log WHERE status = 'successful'"

    def worker_cmd(
        self, setting: int, drain: bool, concurrency: int | None = None
    ) -> tuple[list[str], dict[str, str]]:
        # `pgq run` itself fails to start in pgqueuer 1.6.0: see pgq_worker.py.
        mode = "drain" if drain else "continuous"
        cmd = [PYTHON, "-m", "bench.peers.pgq_worker", str(setting), mode]
        if concurrency is not None:
            cmd.append(str(concurrency))
        return cmd, {"BENCH_PGQ_DSN": self.dsn}

    def describe(self, setting: int, concurrency: int | None = None) -> str:
        # Without max_concurrent_tasks a pgqueuer worker runs every job it has picked at once.
        most = "" if concurrency is None else f", max_concurrent_tasks={concurrency}"
        return f"batch_size={setting}{most} (pgqueuer.run, asyncpg driver)"

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
