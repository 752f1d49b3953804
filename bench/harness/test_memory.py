"""Peak memory: sums over processes, the largest sample, and a real sample of this process."""

from __future__ import annotations

import os

from .memory import PeakMemory, footprint, peak
from .results import Footprint


def test_the_peak_is_the_sample_with_the_largest_rss_sum() -> None:
    small, large = footprint([(10, 5), (20, 8)]), footprint([(40, 2)])
    assert small == Footprint(2, 30, 13)
    assert peak([small, large, small]) is large
    assert peak([]) is None


def test_sampling_this_process_sees_it_and_its_memory() -> None:
    with PeakMemory([os.getpid()], every=0.01) as memory:
        pass
    found = memory.peak
    assert found is not None
    assert found.processes >= 1
    assert found.rss >= found.pss > 0
