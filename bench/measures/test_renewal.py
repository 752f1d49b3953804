"""The master-load figures keep each memory sum's largest value over the window."""

from __future__ import annotations

from ..harness.results import Footprint
from .renewal import larger


def test_each_sum_keeps_its_own_largest_value() -> None:
    assert larger(Footprint(3, 10, 2, 9), Footprint(2, 20, 1, 9)) == Footprint(3, 20, 2, 9)
