"""The I/O section's best peer drain, ceilings and verdicts."""

from __future__ import annotations

from ..harness.app import IO_WAIT
from ..harness.memory import MIB
from ..harness.results import Drain, Footprint, Memory
from .iobound import best, ceiling, markdown, targets, variant


def io_drain(system: str, kind: str, at_once: int, rate: float, pss_mib: int) -> Drain:
    peak = Footprint(2, 2 * pss_mib * MIB, pss_mib * MIB, pss_mib * MIB // 2)
    return Drain(system, variant(kind, at_once), "postgresql", 2, 101, completed=101,
                 after_first=100, span=100 / rate, memory=Memory(peak, peak, 1))  # fmt: skip


def test_the_targets_hold_jobq_to_pgqueuers_best_and_name_the_same_cap() -> None:
    pgq_small = io_drain("pgqueuer", "async", 200, 1800.0, 100)
    pgq_large = io_drain("pgqueuer", "async", 400, 3600.0, 110)
    unclean = io_drain("pgqueuer", "async", 800, 9000.0, 120)
    unclean.note = "not drained"
    drains = [
        io_drain("jobq", "coroutines", 200, 3600.0, 165),
        io_drain("jobq", "threads", 100, 900.0, 166),
        pgq_small,
        pgq_large,
        unclean,
    ]
    assert best(drains, "pgqueuer") is pgq_large, "an unclean drain is never the best"
    assert ceiling(pgq_large) == 400 / IO_WAIT
    lines = targets(drains)
    assert lines[0].startswith("- jobq coroutines (coroutines, 200 at once) >= 1.0x")
    assert (
        "3,600 vs 3,600 jobs/s (1.00x): **met** (pgqueuer's best at 200 at once: 1,800" in lines[0]
    )
    assert lines[1].endswith(
        "PSS <= 1.5x pgqueuer's best (issue 60): 165 vs 110 MiB (1.5x): **met**"
    )
    assert "(0.25x): **MISSED**" in lines[2]
    assert lines[3].endswith("166 vs 110 MiB (1.5x): **MISSED**")
    assert lines[2].endswith("**MISSED**"), "no pgqueuer drain at 100 at once: no note"


def test_a_run_without_pgqueuer_or_without_the_section_gives_no_verdict() -> None:
    assert targets([io_drain("jobq", "coroutines", 200, 1000.0, 100)]) == [
        "- pgqueuer not measured cleanly in this run: no verdict"
    ]
    assert markdown([], 10) == []
