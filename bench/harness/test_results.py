"""How a drain's rate is computed from the database's completion times."""

from __future__ import annotations

import pytest

from .results import Drain


def test_a_rate_counts_the_completions_after_the_first_timestamp() -> None:
    # One timestamp per job: (n - 1) / span.
    assert Drain(
        "x", "y", "z", 1, 11, completed=11, after_first=10, span=2.0
    ).rate == pytest.approx(5.0)
    # Batched timestamps: the first batch of 100 happened before the first timestamp.
    assert Drain(
        "x", "y", "z", 1, 300, completed=300, after_first=200, span=1.0
    ).rate == pytest.approx(200.0)
    assert Drain("x", "y", "z", 1, 1, completed=1).rate == 0.0
