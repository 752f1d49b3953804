"""How many jobs a worker claims at once (--prefetch).

A batch saves a round trip per job, which only matters for short jobs; a long job at the head
of a batch makes the jobs behind it wait, which matters for every job. So:

- `--prefetch N` (N > 1) is fixed: the operator says the jobs are short. `--prefetch 1` is
  one job at a time, each acknowledged with the claim of the next, as jobq always did.
- Without it the size adapts: the worker keeps the durations of its last WINDOW jobs of each
  type, and claims up to ADAPTIVE_MAX jobs only while every type it may claim ran short
  (median under SHORT) and its previous claim came back full (the backlog is deep);
  otherwise one. A worker given --type may claim those types; one without may claim any
  type, so every type in its window must be short, and a type it never ran counts as long
  (it claims one at a time until it has seen one).

Whatever the size, a queued job starts only while more than half of what its lease vouches
for is left (lease_clock.startable); otherwise the worker releases it and the jobs behind it.
"""

from __future__ import annotations

import statistics
from collections import deque

# Jobs remembered per type.
WINDOW = 16
# A type whose median job is shorter than this (seconds) is worth batching.
SHORT = 0.05
# The adaptive batch's size: past about ten jobs a claim, its round trip is a small share of
# the batch's time, while a long job slipped into it delays more jobs.
ADAPTIVE_MAX = 10


class PrefetchRule:
    def __init__(self, fixed: int | None, types: tuple[str, ...]) -> None:
        self.fixed = fixed
        self.types = types
        self.durations: dict[str, deque[float]] = {}
        self.full = False

    def ran(self, job_type: str, seconds: float) -> None:
        """Remember how long a job of `job_type` ran."""
        window = self.durations.get(job_type)
        if window is None:
            window = self.durations[job_type] = deque(maxlen=WINDOW)
        window.append(seconds)

    def claimed(self, asked: int, got: int) -> None:
        """A claim of up to `asked` jobs brought `got`."""
        self.full = asked > 0 and got >= asked

    def size(self) -> int:
        """How many jobs the next claim asks for."""
        if self.fixed is not None:
            return self.fixed
        if not self.full:
            return 1
        types = self.types or tuple(self.durations)
        if not types:
            return 1
        for job_type in types:
            window = self.durations.get(job_type)
            if not window or statistics.median(window) >= SHORT:
                return 1
        return ADAPTIVE_MAX
