"""One pgqueuer worker process: what `pgq run bench.peers.pgq_app:factory` does, minus the CLI.

pgqueuer 1.6.0's `pgq run` fails before it starts here (its --log-level option reaches
setup_fancy_logger as a str, not a LogLevel: AttributeError 'str' object has no attribute
'name'), so this calls the same pieces the command does: the same logging setup at its
default INFO level, pgqueuer.run() (the documented programmatic entry point that the command
wraps), and the command's own event loop runner (uvloop when installed).

Usage: python -m bench.peers.pgq_worker BATCH_SIZE drain|continuous [MAX_CONCURRENT_TASKS]
"""

from __future__ import annotations

import sys

import pgqueuer
from pgqueuer.adapters.cli.cli import asyncio_run
from pgqueuer.core.logconfig import LogLevel, setup_fancy_logger
from pgqueuer.domain.types import QueueExecutionMode


def main(argv: list[str]) -> int:
    batch_size, mode, *rest = argv
    most = int(rest[0]) if rest else None
    setup_fancy_logger(LogLevel.INFO)
    asyncio_run(
        pgqueuer.run(
            "bench.peers.pgq_app:factory",
            batch_size=int(batch_size),
            mode=QueueExecutionMode(mode),
            max_concurrent_tasks=most,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
