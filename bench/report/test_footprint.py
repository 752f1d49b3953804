"""The memory section lists every sampled drain, peak and median of each sum."""

from __future__ import annotations

from ..harness.memory import MIB
from ..harness.results import Drain, Footprint, Memory
from .footprint import markdown


def test_every_sampled_drain_has_a_row_with_rss_pss_and_uss() -> None:
    sampled = Drain("pgqueuer", "best", "postgresql", 2, 100)
    sampled.memory = Memory(
        Footprint(2, 90 * MIB, 60 * MIB, 50 * MIB), Footprint(2, 80 * MIB, 55 * MIB, 45 * MIB), 9
    )
    lines = markdown([sampled, Drain("jobq", "default", "postgresql", 2, 100)])
    assert lines[-2] == "| pgqueuer | best | postgresql | 2 | 2 | 90 / 80 | 60 / 55 | 50 / 45 | 9 |"
    assert sum(line.startswith("| jobq") for line in lines) == 0, "an unsampled drain: no row"
    assert markdown([Drain("jobq", "default", "postgresql", 2, 100)]) == []
