"""The pgqueuer application the bench runs: `pgq run bench.peers.pgq_app:factory`.

Written as pgqueuer's documentation shows a factory: an async context manager that connects
with asyncpg (pgqueuer's own default driver when asyncpg is installed) and yields a PgQueuer.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from pgqueuer import AsyncpgDriver, PgQueuer
from pgqueuer.models import Job

from ..harness.app import IO_WAIT, record_start


@asynccontextmanager
async def factory() -> AsyncIterator[PgQueuer]:
    connection = await asyncpg.connect(os.environ["BENCH_PGQ_DSN"])
    pgq = PgQueuer(AsyncpgDriver(connection))

    @pgq.entrypoint("noop")
    async def noop(job: Job) -> None:
        return None

    @pgq.entrypoint("stamp")
    async def stamp(job: Job) -> None:
        data = json.loads(job.payload or b"{}")
        record_start(int(data["index"]), float(data["sent"]))

    @pgq.entrypoint("wait")
    async def wait(job: Job) -> None:
        await asyncio.sleep(IO_WAIT)  # the I/O section's job (bench/measures/iobound.py)

    @pgq.entrypoint("sleep")
    async def sleep(job: Job) -> None:
        # The crash test's short jobs (bench/measures/prefetch.py): the payload is the seconds.
        await asyncio.sleep(float(job.payload or b"0"))

    try:
        yield pgq
    finally:
        await connection.close()
