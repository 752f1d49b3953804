"""DBOS Transact running the per-step section's workflow (bench/measures/durable.py): ten
steps that each return at once, `count` workflows on `threads` threads of one process,
against the PostgreSQL at the DSN given. Prints one JSON line: the workflows' span.

Run as `python -m bench.peers.dbos_steps DSN COUNT THREADS`, in a process of its own: DBOS
is a process-wide singleton."""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from dbos import DBOS

STEPS = 10


@DBOS.step()
def piece(n: int) -> int:
    return n


@DBOS.workflow()
def ten_steps() -> int:
    return sum(piece(n) for n in range(STEPS))


def main() -> None:
    dsn, count, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    DBOS(config={"name": "bench-steps", "system_database_url": dsn})
    DBOS.launch()
    try:
        ten_steps()  # the first run creates what DBOS keeps, outside the span
        start = time.monotonic()
        with ThreadPoolExecutor(threads) as pool:
            for _ in pool.map(lambda _: ten_steps(), range(count)):
                pass
        span = time.monotonic() - start
    finally:
        DBOS.destroy()
    print(json.dumps({"workflows": count, "threads": threads, "span": span}))


if __name__ == "__main__":
    main()
