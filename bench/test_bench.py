"""Unit tests of the harness itself: no servers, no timings (`python -m pytest bench`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jobq.backends.postgresql import (
    PostgresBackend,
    claim_statement,
    complete_and_claim_statement,
)

from . import limit, profiling, snapshot
from .results import Drain


def test_the_pgbench_script_holds_jobqs_own_statements() -> None:
    script = limit.script(600.0).splitlines()
    claim = " ".join(claim_statement(False).split()).replace("%(token)s", ":token")
    for name in ("lease", "host", "pid"):
        claim = claim.replace(f"%({name})s", f":{name}")
    ack = " ".join(PostgresBackend.sql_complete.split())
    ack = ack.replace("%(id)s", ":id").replace("%(token)s", ":token")
    assert script[0].startswith("\\set token random(")
    assert script[1] == "\\set lease 600.0"
    assert script[2] == claim + " \\gset"
    assert script[3] == ack + ";"


def test_the_fused_pgbench_script_holds_jobqs_own_statement() -> None:
    script = limit.fused_script(600.0).splitlines()
    fused = " ".join(complete_and_claim_statement(False).split())
    for name in ("id", "token", "new_token", "lease", "host", "pid"):
        fused = fused.replace(f"%({name})s", f":{name}")
    assert script[0].startswith("\\set new_token random(")
    assert script[1] == "\\set lease 600.0"
    assert script[2] == fused + " \\gset"
    assert script[3] == "\\set token :new_token", "the next run acknowledges this claim"


def test_an_unknown_parameter_is_refused() -> None:
    with pytest.raises(ValueError, match="does not set"):
        limit.to_pgbench("SELECT %(nope)s", {"id"})


def test_whitespace_inside_a_literal_is_refused() -> None:
    with pytest.raises(ValueError, match="literal"):
        limit.to_pgbench("SELECT 'a  b' WHERE id = %(id)s", {"id"})


def test_a_rate_counts_the_completions_after_the_first_timestamp() -> None:
    # One timestamp per job: (n - 1) / span.
    assert Drain("x", "y", "z", 1, 11, completed=11, after_first=10, span=2.0).rate == 5.0
    # Batched timestamps: the first batch of 100 happened before the first timestamp.
    assert Drain("x", "y", "z", 1, 300, completed=300, after_first=200, span=1.0).rate == 200.0
    assert Drain("x", "y", "z", 1, 1, completed=1).rate == 0.0


def test_profile_summary_keeps_worker_loop_samples_only(tmp_path: Path) -> None:
    master = 'process 1:"jobq-supervise: master 2/2 workers [all types] running"'
    worker = 'process 2:"jobq-supervise: worker job 7 noop bench.Noop 0s"'
    loop = "Child.work (jobq/worker/child.py:85)"
    raw = tmp_path / "raw.txt"
    raw.write_text(
        "\n".join(
            [
                f"{master};Master.tick (jobq/supervisor/master.py:149) 50",
                f"{master};{worker};{loop};Queue.claim (jobq/queue.py:237);"
                "Cursor.execute (/x/site-packages/psycopg/cursor.py:97) 30",
                f"{master};{worker};{loop};Child.begin (jobq/worker/child.py:122) 10",
            ]
        )
    )
    total, self_top, inclusive, outside = profiling.summarize(raw)
    assert total == 40
    assert self_top[0] == ("Cursor.execute (psycopg/cursor.py)", 0.75)
    assert ("Queue.claim (jobq/queue.py)", 0.75) in inclusive
    assert outside == [("Child.begin (jobq/worker/child.py)", 0.25)]


def test_a_slow_renewal_round_is_explained(tmp_path: Path) -> None:
    from .context import Bench, Settings
    from .procs import Processes
    from .report import renewal_explanation, targets
    from .results import RenewalRound

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


def test_scale_bursts_alternate_two_types_and_add_up() -> None:
    from .scale import BURST, mixed

    bursts = mixed(BURST * 2 + 10)
    assert [name for name, _ in bursts][:4] == ["a", "b", "a", "b"]
    assert sum(jobs for _, jobs in bursts) == BURST * 2 + 10
    assert max(jobs for _, jobs in bursts) <= BURST


def test_scale_targets_hold_each_large_backlog_to_its_small_one() -> None:
    from .results import EnqueueRate
    from .scale import targets

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
    assert "0.01x" in lines[1] and lines[1].endswith("**MISSED**")
    assert lines[2] == "- enqueue_many on PostgreSQL >= 50,000 jobs/s: 100,000: **met**"


def test_jobq_at_freezes_jobq_as_it_was_at_that_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv("BENCH_CODE", raising=False)  # freeze() sets it; restored after
    commit = snapshot.jobq_at(["--quick", "--jobq-at", "HEAD~1", "--only", "scale"])
    assert commit == "HEAD~1"
    code = snapshot.freeze(commit)
    assert code is not None
    try:
        then = subprocess.run(
            ["git", "-C", str(snapshot.TREE), "show", f"{commit}:jobq/__init__.py"],
            capture_output=True,
            check=True,
        ).stdout
        assert (code / "jobq" / "__init__.py").read_bytes() == then
        assert (code / "bench" / "snapshot.py").exists()
    finally:
        snapshot.release(code)


def prefetch_drain(system: str, variant: str, workers: int, rate: float) -> Drain:
    return Drain(system, variant, "postgresql", workers, 101, completed=101, after_first=100,
                 span=100 / rate)  # fmt: skip


def test_prefetch_targets_hold_each_prefetch_to_one_at_a_time_and_pgqueuer_at_8() -> None:
    from .prefetch import targets

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
    from .prefetch import table

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
    from .prefetch import markdown
    from .results import Recovery

    assert markdown([prefetch_drain("jobq", "default", 8, 10.0)], [], 10, [8]) == []
    kills = Recovery("jobq", "prefetch 10", "jobq-supervise ...", held=[9, 7],
                     delays=[6.0, 8.0], released_delays=[0.25, 0.75], extra_attempts=2)  # fmt: skip
    stuck = Recovery("pgqueuer", "default", "2 processes", held=[30], note="not done in time")
    lines = markdown([], [kills, stuck], 10, [8])
    assert "| jobq | jobq-supervise ... | 2 | 9, 7 | 0.50 / 0.75 | 7.00 / 8.00 | 2 |  |" in lines
    assert "| pgqueuer | 2 processes | 1 | 30 | - | - | - | not done in time |" in lines
    assert "- not measured at W = 8 in this run" in lines


def test_the_prefetch_section_sets_up_pgqueuer_alone() -> None:
    from .main import parse, settings_from, wanted_peers
    from .peers import PEERS, Pgqueuer

    settings = settings_from(parse(["--quick", "--only", "prefetch"]))
    assert settings.sections == {"prefetch"}
    assert wanted_peers(settings.sections) == (Pgqueuer,)
    assert wanted_peers({"prefetch", "peers"}) == PEERS
    assert wanted_peers({"drain"}) == ()
