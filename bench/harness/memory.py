"""The memory of a system under test: RSS, PSS and USS summed over every process of some
process trees (a supervisor with its workers and helpers, or a peer's worker processes),
sampled in a thread of the bench while the system runs.

Summed RSS counts a page shared by several processes once per process, as `ps` and
Kubernetes' per-container `rss` do not agree with a pod's limit: forked workers share their
parent's pages. PSS splits each shared page between its sharers, so summed over all of a
system's processes it is what the system occupies, the figure a user pays; USS (private
pages only) is what ending one process would give back. All three come from the kernel's
`/proc/<pid>/smaps_rollup`, one read per process per sample.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType

import psutil

from .results import Footprint, Memory

MIB = 2**20

SAMPLE_EVERY = 0.25  # seconds; smaps_rollup costs well under a millisecond per process

# smaps_rollup's fields, in kB, summed into (rss, pss, uss).
PRIVATE = ("Private_Clean", "Private_Dirty")


def rollup(text: str) -> tuple[int, int, int]:
    """(rss, pss, uss) in bytes from the text of /proc/<pid>/smaps_rollup."""
    fields: dict[str, int] = {}
    for line in text.splitlines()[1:]:  # the first line names the address range
        name, _, rest = line.partition(":")
        value = rest.split()
        if value and value[0].isdigit():
            fields[name] = int(value[0]) * 1024
    return fields["Rss"], fields["Pss"], sum(fields.get(name, 0) for name in PRIVATE)


def process_memory(pid: int) -> tuple[int, int, int] | None:
    """(rss, pss, uss) of a live process; None once it has gone."""
    try:
        return rollup(Path(f"/proc/{pid}/smaps_rollup").read_text())
    except (OSError, KeyError):
        return None


def footprint(samples: Iterable[tuple[int, int, int]]) -> Footprint:
    """The sums of (rss, pss, uss), one per process."""
    found = list(samples)
    return Footprint(
        len(found), sum(s[0] for s in found), sum(s[1] for s in found), sum(s[2] for s in found)
    )


def summary(footprints: Sequence[Footprint]) -> Memory | None:
    """Each sum's largest and median value over the samples (None before any sample).
    Each column is taken on its own: the peak PSS need not be the sample of the peak RSS."""
    if not footprints:
        return None

    def over(pick: Callable[[list[int]], float]) -> Footprint:
        columns = zip(*((f.processes, f.rss, f.pss, f.uss) for f in footprints), strict=True)
        return Footprint(*(int(pick(list(column))) for column in columns))

    return Memory(over(max), over(statistics.median), len(footprints))


def tree_pids(roots: list[int]) -> list[int]:
    """Every live process under `roots`, the roots included."""
    pids = []
    for root in roots:
        with contextlib.suppress(psutil.Error):
            parent = psutil.Process(root)
            pids += [parent.pid, *(child.pid for child in parent.children(recursive=True))]
    return pids


def processes_memory(pids: Iterable[int]) -> Footprint:
    """RSS, PSS and USS summed over the processes of `pids` still alive."""
    return footprint(m for pid in pids if (m := process_memory(pid)) is not None)


def tree_memory(roots: list[int]) -> Footprint:
    """RSS, PSS and USS summed over every live process under `roots`."""
    return processes_memory(tree_pids(roots))


class PeakMemory:
    """`with PeakMemory(pids) as memory:` samples the trees until the block ends;
    `memory.summary` is then the peak and median of each sum."""

    def __init__(self, roots: list[int], every: float = SAMPLE_EVERY) -> None:
        self.roots = roots
        self.every = every
        self.samples: list[Footprint] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, name="bench-memory", daemon=True)

    def run(self) -> None:
        while True:
            found = tree_memory(self.roots)
            if found.processes:  # not before the first process is up, nor after the last
                self.samples.append(found)
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
    def summary(self) -> Memory | None:
        return summary(self.samples)
