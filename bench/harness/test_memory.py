"""Memory: smaps_rollup read, sums over processes, peak and median, and a real sample."""

from __future__ import annotations

import os

from .memory import PeakMemory, footprint, rollup, summary
from .results import Footprint, Memory

ROLLUP = """\
55d0c0a4e000-7ffd5a3f4000 ---p 00000000 00:00 0                          [rollup]
Rss:               10240 kB
Pss:                4096 kB
Pss_Anon:           2048 kB
Shared_Clean:       6144 kB
Private_Clean:      1024 kB
Private_Dirty:      2048 kB
Swap:                  0 kB
"""


def test_a_rollup_gives_rss_pss_and_private_pages_as_uss() -> None:
    assert rollup(ROLLUP) == (10240 * 1024, 4096 * 1024, 3072 * 1024)


def test_the_summary_takes_each_sums_peak_and_median_on_its_own() -> None:
    small, large = footprint([(10, 5, 2), (20, 8, 3)]), footprint([(40, 2, 1)])
    assert small == Footprint(2, 30, 13, 5)
    assert summary([small, large, small]) == Memory(
        peak=Footprint(2, 40, 13, 5), median=Footprint(2, 30, 13, 5), samples=3
    )
    assert summary([]) is None


def test_sampling_this_process_sees_it_and_its_memory() -> None:
    with PeakMemory([os.getpid()], every=0.01) as memory:
        pass
    found = memory.summary
    assert found is not None
    assert found.peak.processes >= 1
    assert found.peak.rss >= found.peak.pss >= found.peak.uss > 0
