"""The procrastinate application the bench runs:
`procrastinate --app bench.peers.proc_app.app worker`.

Tasks are async, as procrastinate's documentation recommends for concurrency > 1; a sync task
would run in a thread per job. BENCH_PROC_POOL sets the connection pool's size for the tuned
runs (the pool must hold one connection per concurrent job, plus the listener's).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import procrastinate

from ..harness.app import IO_WAIT, record_start

pool: dict[str, Any] = {}
if os.environ.get("BENCH_PROC_POOL"):
    size = int(os.environ["BENCH_PROC_POOL"])
    pool = {"min_size": size, "max_size": size}

app = procrastinate.App(
    connector=procrastinate.PsycopgConnector(
        conninfo=os.environ.get("BENCH_PROC_DSN", "postgresql:///unset"), **pool
    )
)


@app.task(name="noop")
async def noop() -> None:
    return None


@app.task(name="wait")
async def wait() -> None:
    await asyncio.sleep(IO_WAIT)  # the I/O section's job (bench/measures/iobound.py)


@app.task(name="stamp")
async def stamp(index: int, sent: float) -> None:
    record_start(index, sent)
