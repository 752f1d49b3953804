"""How many jobs a worker claims at once (--prefetch).

A batch saves a round trip per job, which only matters for short jobs; a long job at the head
of a batch makes the jobs behind it wait, which matters for every job. So:

- `--prefetch N` (N > 1) is fixed: the operator says the jobs are short. `--prefetch 1` is
  one job at a time, each acknowledged with the claim of the next, as jobq always did.
- Without it the size adapts: the worker keeps the durations of its last WINDOW jobs of each
  type, and claims ADAPTIVE_MAX jobs only while every type it may claim ran short (median
  under SHORT) and its previous claim came back full (the backlog is deep; rows a limit
  refused count, since they were there to pick); otherwise one. After a claim of short jobs
  that came back short, the next asks for as many as it found: the backlog is about that
  deep. Falling to one job there made each batch grow again through 1, 10, 20, ... on a
  backlog that stays shallow because it fills as fast as it drains (limited keys, each
  with its next job woken or claimed as the last ends): three claims where one would do.
  A worker given --type may claim those types; one without may claim any type, so every
  type in its window must be short, and a type it never ran counts as long (it claims one
  at a time until it has seen one; the acknowledgement of that one claims what the rule
  asks for once it has run, child.py's chains_one). Each further claim that comes back
  full doubles the size, up to the most jobs that, at the slowest of those medians, run
  within BATCH_SECONDS and within half of what a lease vouches for (past that, the jobs at
  the tail would be released unstarted), and never past MAX_PREFETCH, the bound on a
  claim's messages. Very short jobs on a deep backlog so claim hundreds at once: the claim,
  the acknowledgement and the reports to the master are paid once a batch.
- While the jobs of its last claim were all of limited classes, the worker asks for its
  share of the limited work at once instead (key_share.py), within the same ceiling.

Whatever the size, a queued job starts only while more than half of what its lease vouches
for is left (lease_clock.startable); otherwise the worker releases it and the jobs behind it.
"""

from __future__ import annotations

import statistics
from collections import deque

from ..options import MAX_PREFETCH

# Jobs remembered per type.
WINDOW = 16
# A type whose median job is shorter than this (seconds) is worth batching.
SHORT = 0.05
# The adaptive batch's size: past about ten jobs a claim, its round trip is a small share of
# the batch's time, while a long job slipped into it delays more jobs.
ADAPTIVE_MAX = 10
# How long a batch grown past ADAPTIVE_MAX may run, by its jobs' medians: as long as ten jobs
# just under SHORT, so that growing never makes the jobs behind a batch wait longer.
BATCH_SECONDS = ADAPTIVE_MAX * SHORT


class PrefetchRule:
    def __init__(self, fixed: int | None, types: tuple[str, ...], vouched: float) -> None:
        """`vouched`: how long a lease vouches for an attempt, from its start to its kill
        point (lease_clock.kill_point)."""
        self.fixed = fixed
        self.types = types
        self.vouched = vouched
        self.durations: dict[str, deque[float]] = {}
        # Types whose window holds their first run only: see ran().
        self.first_only: set[str] = set()
        self.full = False
        self.asked = 0
        self.got = 0

    def ran(self, job_type: str, seconds: float) -> None:
        """Remember how long a job of `job_type` ran. A worker's first run of a type pays
        for what the worker loads and warms on first use, on a machine busy starting its
        siblings: it is all the rule knows of the type until the second run, which replaces
        it. Kept, a first run over SHORT held the median over it through the next jobs of
        0.1 ms, and the worker claimed one at a time while its siblings took its share."""
        window = self.durations.get(job_type)
        if window is None:
            window = self.durations[job_type] = deque(maxlen=WINDOW)
            self.first_only.add(job_type)
        elif job_type in self.first_only:
            self.first_only.discard(job_type)
            window.clear()
        window.append(seconds)

    def claimed(self, asked: int, got: int) -> None:
        """A claim of up to `asked` jobs brought `got`, the rows a limit refused included
        (Claims.picked): a batch cut short by refusals met a deep backlog all the same, and
        falling back to one job a claim there made a drain of limited keys commit once a
        job."""
        self.full = asked > 0 and got >= asked
        self.asked = asked
        self.got = got

    def size(self, share: int | None = None) -> int:
        """How many jobs the next claim asks for; `share`, the worker's share of the
        limited work while it runs limited jobs (see key_share.py)."""
        if self.fixed is not None:
            return self.fixed
        slowest = self.slowest_short()
        if slowest is None:
            return 1
        if share is not None:
            return max(1, min(self.ceiling(slowest), max(ADAPTIVE_MAX, self.got, share)))
        if not self.full:
            return max(1, min(self.got, self.ceiling(slowest)))
        if self.asked < ADAPTIVE_MAX:
            return ADAPTIVE_MAX
        return max(ADAPTIVE_MAX, min(2 * self.asked, self.ceiling(slowest)))

    def seen(self, job_type: str) -> bool:
        """Whether the worker ran a job of `job_type` (and knows how long it takes)."""
        return job_type in self.durations

    def slowest_short(self) -> float | None:
        """The slowest median of the types the worker may claim, if every one ran short."""
        types = self.types or tuple(self.durations)
        slowest = None
        for job_type in types:
            window = self.durations.get(job_type)
            median = statistics.median(window) if window else SHORT
            if median >= SHORT:
                return None
            slowest = max(slowest or 0.0, median)
        return slowest

    def ceiling(self, median: float) -> int:
        """The most jobs of this median a grown batch holds."""
        within = min(BATCH_SECONDS, self.vouched / 2)
        return MAX_PREFETCH if median <= 0 else min(MAX_PREFETCH, int(within / median))
