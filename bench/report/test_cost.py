"""Issue 36's verdicts: each target judged at W = 8 only, with the CPU split beside it."""

from __future__ import annotations

from ..harness.results import Drain
from .cost import targets


def drain(system: str, variant: str, rate: float, workers: int = 8) -> Drain:
    d = Drain(system, variant, "postgresql", workers, 1001, completed=1001, after_first=1000,
              span=1000 / rate, window_jobs=1000)  # fmt: skip
    d.client_cpu, d.master_cpu, d.db_cpu = 0.07, 0.01, 0.05
    return d


def test_each_target_is_judged_at_eight_workers() -> None:
    lines = targets(
        [
            drain("jobq", "default", 7000.0),
            drain("pgqueuer", "best", 10000.0),
            drain("pgqueuer", "default", 1.0),  # the best setting wins when measured
            drain("jobq", "prefetch 1", 1500.0),
            drain("floor", "psycopg", 2000.0),
            drain("jobq", "default", 1.0, workers=2),  # another W: not a target
        ]
    )
    verdicts = [line.split("**")[1] for line in lines]
    assert verdicts == ["met", "met", "met", "MISSED"]
    assert "7,000 against 10,000 jobs/s, 0.70x" in lines[0]
    assert "client 0.070 (0.010), PostgreSQL 0.050 ms/job" in lines[0]
    assert "1,500 against 2,000 jobs/s, 0.75x" in lines[3]


def test_a_cost_above_its_ceiling_is_missed() -> None:
    d = drain("jobq", "default", 7000.0)
    d.db_cpu = 0.09
    assert targets([d]) == [
        "- client CPU per job, jobq's default <= 0.08 ms at W = 8: 0.070: **met**",
        "- PostgreSQL CPU per job, jobq's default <= 0.06 ms at W = 8: 0.090: **MISSED**",
    ]


def test_nothing_measured_at_eight_workers_says_nothing() -> None:
    assert targets([drain("jobq", "default", 7000.0, workers=4)]) == []
