"""The scale section's bursts and its targets."""

from __future__ import annotations

from ..harness.results import Drain, EnqueueRate
from .scale import BURST, mixed, targets


def test_scale_bursts_alternate_two_types_and_add_up() -> None:
    bursts = mixed(BURST * 2 + 10)
    assert [name for name, _ in bursts][:4] == ["a", "b", "a", "b"]
    assert sum(jobs for _, jobs in bursts) == BURST * 2 + 10
    assert max(jobs for _, jobs in bursts) <= BURST


def test_scale_targets_hold_each_large_backlog_to_its_small_one() -> None:
    def drain(variant: str, rate: float) -> Drain:
        return Drain("jobq", variant, "postgresql", 8, 101, completed=101, after_first=100,
                     span=100 / rate)  # fmt: skip

    lines = targets(
        [
            drain("typed, small backlog", 1000.0),
            drain("typed, large backlog", 900.0),
            drain("typed, behind a large backlog of another type", 15.0),
        ],
        [EnqueueRate("postgresql", "enqueue_many", 100_000, 1.0)],
    )
    assert lines[0].startswith("- postgresql, typed, large backlog: 900 jobs/s, 0.90x")
    assert lines[0].endswith("**met**")
    assert "0.01x" in lines[1]
    assert lines[1].endswith("**MISSED**")
    assert lines[2] == "- enqueue_many on PostgreSQL >= 50,000 jobs/s: 100,000: **met**"
