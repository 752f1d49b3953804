"""The verdicts on issue 6's targets, and the explanation of a miss."""

from __future__ import annotations

from pathlib import Path

from ..harness.context import Bench, Settings
from ..harness.procs import Processes
from ..harness.results import RenewalRound
from .verdicts import renewal_explanation, targets


def test_a_slow_renewal_round_is_explained(tmp_path: Path) -> None:
    settings = Settings(
        jobs=10, workers=[1], other_jobs=10, mariadb_workers=[], sqlite_workers=[],
        latency_rate=1, latency_seconds=1, latency_workers=1, master_jobs=1,
        master_job_seconds=1, master_window=1, sections=set(), out=tmp_path, quick=True,
        info_logs_at=None,
    )  # fmt: skip
    bench = Bench(settings, tmp_path, Processes(tmp_path))
    bench.renewals = [RenewalRound(1000, 20, 8.0, 124.0, 130.0, 1.0, 1000)]
    assert "MISSED" in targets(bench)[0]
    assert "generic plan" in renewal_explanation(bench)[0]
    bench.renewals = [RenewalRound(1000, 20, 8.0, 9.0, 10.0, 1.0, 1000)]
    assert "met" in targets(bench)[0]
    assert renewal_explanation(bench) == []
