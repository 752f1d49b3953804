"""The prefetch section's table, targets and recoveries."""

from __future__ import annotations

from ..harness.results import Drain, Recovery
from .prefetch import markdown, table, targets


def prefetch_drain(system: str, variant: str, workers: int, rate: float) -> Drain:
    return Drain(system, variant, "postgresql", workers, 101, completed=101, after_first=100,
                 span=100 / rate)  # fmt: skip


def test_prefetch_targets_hold_each_prefetch_to_one_at_a_time_and_pgqueuer_at_8() -> None:
    lines = targets(
        [
            prefetch_drain("jobq", "prefetch 1", 8, 1000.0),
            prefetch_drain("jobq", "prefetch 10", 8, 2500.0),
            prefetch_drain("jobq", "prefetch adaptive", 8, 1500.0),
            prefetch_drain("pgqueuer", "default", 8, 2000.0),
            prefetch_drain("jobq", "prefetch 10", 2, 9000.0),  # another W: not a target
        ]
    )
    assert lines == [
        "- jobq prefetch 10 >= 2x jobq one at a time at W=8: 2,500 vs 1,000 jobs/s (2.50x): "
        "**met**",
        "- jobq prefetch 10 ahead of pgqueuer's default (batch 10) at W=8: 2,500 vs 2,000 "
        "jobs/s: **met**",
        "- jobq prefetch adaptive >= 2x jobq one at a time at W=8: 1,500 vs 1,000 jobs/s "
        "(1.50x): **MISSED**",
        "- jobq prefetch adaptive ahead of pgqueuer's default (batch 10) at W=8: 1,500 vs "
        "2,000 jobs/s: **MISSED**",
    ]


def test_the_prefetch_table_divides_by_one_at_a_time_and_pgqueuers_default() -> None:
    lines = table(
        [
            prefetch_drain("jobq", "prefetch 1", 4, 1000.0),
            prefetch_drain("jobq", "prefetch 10", 4, 3000.0),
            prefetch_drain("pgqueuer", "default", 4, 1500.0),
        ],
        [4, 16],
    )
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    row = dict(zip(header, (c.strip() for c in lines[2].strip("|").split("|")), strict=True))
    assert row["jobq --prefetch 1"] == "1,000"
    assert row["pgqueuer best"] == "1,500", "no sweep result: the default stands for the best"
    assert row["prefetch 10 / prefetch 1"] == "3.00x"
    assert row["prefetch 10 / pgqueuer default"] == "2.00x"
    assert row["prefetch adaptive / prefetch 1"] == "-"
    assert lines[3].startswith("| 16 | - |"), "an unmeasured W is a row of dashes"


def test_the_prefetch_section_reports_recoveries_and_is_absent_when_not_run() -> None:
    assert markdown([prefetch_drain("jobq", "default", 8, 10.0)], [], 10, [8]) == []
    kills = Recovery("jobq", "prefetch 10", "jobq-supervise ...", held=[9, 7],
                     delays=[6.0, 8.0], released_delays=[0.25, 0.75], extra_attempts=2)  # fmt: skip
    stuck = Recovery("pgqueuer", "default", "2 processes", held=[30], note="not done in time")
    lines = markdown([], [kills, stuck], 10, [8])
    assert "| jobq | jobq-supervise ... | 2 | 9, 7 | 0.50 / 0.75 | 7.00 / 8.00 | 2 |  |" in lines
    assert "| pgqueuer | 2 processes | 1 | 30 | - | - | - | not done in time |" in lines
    assert "- not measured at W = 8 in this run" in lines
