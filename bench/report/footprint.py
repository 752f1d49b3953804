"""The memory of every drain of the run, whatever its section: what each system's processes
held while it drained, summed over them, as RSS, PSS and USS (see harness/memory.py)."""

from __future__ import annotations

from collections.abc import Iterable

from ..harness.memory import MIB
from ..harness.results import Drain, Footprint


def mib(f: Footprint) -> list[str]:
    return [f"{value / MIB:,.0f}" for value in (f.rss, f.pss, f.uss)]


def markdown(drains: Iterable[Drain]) -> list[str]:
    """The section of RESULTS.md; empty when no drain was sampled."""
    sampled = [d for d in drains if d.memory is not None]
    if not sampled:
        return []
    lines = [
        "## Memory of every drain (issue 60)",
        "",
        "Summed over all of the system's processes (jobq: the master, its workers and "
        "helpers; pgbench: its process; the floor and the peers: their worker processes), "
        "from each process's `/proc/<pid>/smaps_rollup`, sampled every 0.25 s while it "
        "drained: the peak and the median of each sum, taken on its own. PSS splits a page "
        "shared by forked processes between them and is what a memory limit on the node "
        "counts; RSS counts it once per process; USS is private pages alone.",
        "",
        "| system | variant | database | W | processes, peak | RSS MiB peak / median "
        "| PSS MiB peak / median | USS MiB peak / median | samples |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for d in sampled:
        assert d.memory is not None
        peak, median = mib(d.memory.peak), mib(d.memory.median)
        columns = " | ".join(f"{p} / {m}" for p, m in zip(peak, median, strict=True))
        lines.append(
            f"| {d.system} | {d.variant} | {d.database} | {d.workers} "
            f"| {d.memory.peak.processes} | {columns} | {d.memory.samples} |"
        )
    return [*lines, ""]
