"""When a worker child is replaced by a fresh one (--max-jobs-per-child,
--max-memory-per-child), and the exit codes that tell its master why it left."""

from __future__ import annotations

import psutil

from .settings import WorkerSettings

EXIT_RECYCLED = 4  # --max-jobs-per-child reached
EXIT_MEMORY = 5  # --max-memory-per-child passed
# A concurrent worker's attempt ended while processes ran that could be another attempt's:
# the worker stopped with them all (worker/concurrent/leftovers.py).
EXIT_STRAYS = 6


def recycle_due(settings: WorkerSettings, done: int) -> tuple[int, str] | None:
    """(exit code, why) when the worker should be replaced after `done` jobs, else None."""
    limit = settings.max_jobs
    if limit and done >= limit:
        return EXIT_RECYCLED, f"{done} jobs done"
    ceiling = settings.max_memory_mib
    if ceiling:
        rss = psutil.Process().memory_info().rss / 2**20
        if rss > ceiling:
            return EXIT_MEMORY, f"RSS {rss:.0f} MiB is over {ceiling:.0f} MiB"
    return None
