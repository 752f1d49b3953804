"""The peak memory of a system under test: RSS summed over every process of some process
trees (a supervisor with its workers and helpers, or a peer's worker processes), sampled in a
thread of the bench while the system runs.

Summed RSS counts a page shared by several processes once per process, as `ps` and the
issue's figures do; forked workers share their parent's pages, so the PSS sum (each shared
page split between its sharers) is kept alongside it as the fairer figure.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable
from types import TracebackType

import psutil

from .results import Footprint

MIB = 2**20

SAMPLE_EVERY = 0.25  # seconds; reading smaps for PSS costs a few ms per process


def footprint(samples: Iterable[tuple[int, int]]) -> Footprint:
    """The sums of (rss, pss) pairs, one per process."""
    pairs = list(samples)
    return Footprint(len(pairs), sum(r for r, _ in pairs), sum(p for _, p in pairs))


def peak(footprints: Iterable[Footprint]) -> Footprint | None:
    """The sample with the largest RSS sum (None before any sample)."""
    return max(footprints, key=lambda f: f.rss, default=None)


def tree_memory(roots: list[int]) -> Footprint:
    """RSS and PSS of every live process under `roots`, the roots included."""
    pairs = []
    for root in roots:
        with contextlib.suppress(psutil.Error):
            parent = psutil.Process(root)
            for process in [parent, *parent.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    info = process.memory_full_info()
                    pairs.append((int(info.rss), int(info.pss)))
    return footprint(pairs)


class PeakMemory:
    """`with PeakMemory(pids) as memory:` samples the trees until the block ends;
    `memory.peak` is then the sample with the largest RSS sum."""

    def __init__(self, roots: list[int], every: float = SAMPLE_EVERY) -> None:
        self.roots = roots
        self.every = every
        self.samples: list[Footprint] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, name="bench-memory", daemon=True)

    def run(self) -> None:
        while True:
            self.samples.append(tree_memory(self.roots))
            if self.done.wait(self.every):
                return

    def __enter__(self) -> PeakMemory:
        self.thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.done.set()
        self.thread.join()

    @property
    def peak(self) -> Footprint | None:
        return peak(self.samples)
