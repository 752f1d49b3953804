"""A worker's share of the limited work, which sizes its claims while it runs limited jobs.

A limited key's next job is claimed by the acknowledgement that frees its slot (see
backends/postgresql/successors.py), so a key's jobs stay with the worker that claimed its
first. The adaptive claim (prefetch.py) doubles while claims come back full, and in a burst of
keys the first worker up doubled through them before its siblings had claimed twice: one
worker of eight held 300 to 640 of 1,000 keys and ran their jobs in series, while its
siblings, their few keys done, had nothing left to claim (bench, limits section).

So while the jobs of its last claim were all of classes that declare a concurrency limit, a
worker sizes its claims by its share of the limited work: the limited jobs ready and the
limited attempts in progress, over its pool's workers. It asks for that share at once rather
than doubling up to it, and for no more, which leaves the rest to its siblings. It never
asks for fewer jobs than its last claim brought, so it keeps the keys it holds (its
acknowledgement claims their next jobs): a share that shrinks moves no key. On MariaDB and
SQLite, where endings wake a key's next job for any claim, the share spreads a burst all the
same.

The work is counted (two index scans, each bounded by what the pool could claim) at most
once every REFRESH seconds per worker, and only while it runs limited jobs. The count covers
every type and every supervisor on the database, while the worker's pool is the only one it
knows: a worker that shares the database with other pools or nodes may take more than an
even share, as every worker did before, never less.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from ..job import registered

log = logging.getLogger("jobq")

# Seconds between two counts: a new burst's keys are shared out at most this late.
REFRESH = 1.0


def limited(class_name: str) -> bool:
    """Whether the job class named `class_name` declares a concurrency limit."""
    cls = registered(class_name)
    return cls is not None and cls.concurrency is not None


class KeyShare:
    def __init__(self, workers: int, clock: Callable[[], float] = time.monotonic) -> None:
        """`workers`: how many the worker's pool has."""
        self.workers = max(1, workers)
        self.clock = clock
        self.limited = False  # the last claim's jobs were all of limited classes
        self.count = 0
        self.counted_at: float | None = None

    def claimed(self, class_names: Iterable[str]) -> None:
        """A claim brought jobs of these classes (none: it says nothing of the work)."""
        names = list(class_names)
        if names:
            self.limited = all(limited(name) for name in names)

    def share(self, count: Callable[[int], int], most: int) -> int | None:
        """The jobs a claim asks for as the worker's share, or None when its last claim's
        jobs were not all limited. `count(n)` counts the limited work (each part up to n);
        a count that fails leaves the last one in place: the claim that follows meets the
        same fault, and deals with it."""
        if not self.limited:
            return None
        now = self.clock()
        if self.counted_at is None or now - self.counted_at >= REFRESH:
            self.counted_at = now
            try:
                self.count = count(self.workers * most)
            except Exception as error:
                log.debug("Could not count the limited work: %s", error)
        return -(-self.count // self.workers)
