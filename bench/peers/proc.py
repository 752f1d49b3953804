"""procrastinate as the bench drives it: its schema, a preload, and `procrastinate worker`."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from ..harness.context import PYTHON
from .peer import CHUNK, Peer

# Candidates for "best": procrastinate runs one job at a time per worker by default. More
# concurrent jobs per process trade latency and fairness for fewer idle round trips, which a
# drain of no-op jobs rewards.
PROC_CONCURRENCY = (1, 8, 32)


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

    async def preload(self, jobs: int, work: str) -> None:
        app = self.app()
        async with app.open_async():
            task = app.tasks[work]
            left = jobs
            while left > 0:
                n = min(CHUNK, left)
                await task.batch_defer_async(*({} for _ in range(n)))
                left -= n

    def remaining(self) -> int:
        return int(
            self.scalar("SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')")
        )

    def done(self) -> str:
        return "SELECT at FROM procrastinate_events WHERE type = 'succeeded'"

    def worker_cmd(
        self, setting: int, drain: bool, concurrency: int | None = None
    ) -> tuple[list[str], dict[str, str]]:
        # The setting is its concurrency: `concurrency` adds nothing.
        cmd = [
            PYTHON, "-m", "procrastinate", "--app", "bench.peers.proc_app.app", "worker",
            "--concurrency", str(setting), "--one-shot" if drain else "--wait",
        ]  # fmt: skip
        extra = {"BENCH_PROC_DSN": self.dsn}
        if setting != self.default_setting():
            # One connection per concurrent job, one for LISTEN, one spare.
            extra["BENCH_PROC_POOL"] = str(setting + 2)
        return cmd, extra

    def describe(self, setting: int, concurrency: int | None = None) -> str:
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
