"""Prefetch (issue 18): jobq claiming several jobs per statement, against jobq one at a time
and pgqueuer, and what a worker crash costs each in recovery delay (bench/measures/crash.py).

The drains load their jobs as applications do (bursts of enqueue_many of one type) and run
typed workers (`--type a`); then VACUUM ANALYZE and CHECKPOINT, as for every other drain.
pgqueuer's drains are the peers section's when the same run has them, else measured here.
"""

from __future__ import annotations

import statistics
import subprocess
from collections.abc import Callable, Sequence
from functools import partial

from ..harness.context import PYTHON, REPO, Bench
from ..harness.results import Drain, Recovery
from ..peers.peer import Peer
from . import crash
from .drain import Variant, drain
from .scale import load

TYPE = "a"  # the drains' job type, run by `--type a` workers

# (variant, jobq-supervise options): the flag's fixed setting, its default, and it turned off.
VARIANTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("prefetch 1", ("--prefetch", "1")),
    ("prefetch 10", ("--prefetch", "10")),
    ("prefetch adaptive", ()),
)
ONE_AT_A_TIME = "prefetch 1"
FIXED = "prefetch 10"

TARGET_SPEEDUP = 2.0  # over jobq one at a time, at W = TARGET_WORKERS
TARGET_WORKERS = 8

Measure = Callable[[str, Callable[[], Drain]], None]


def has_prefetch(bench: Bench) -> bool:
    """Whether the jobq measured has `--prefetch` (code from before it, by --jobq-at, not)."""
    cmd = [PYTHON, "-m", "jobq.supervisor", "--help"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO,
                         env=bench.env(), check=False)  # fmt: skip
    return "--prefetch" in out.stdout


def jobq_drain(bench: Bench, dsn: str, workers: int, variant: str, options: Sequence[str]) -> Drain:
    jobs = bench.settings.prefetch_jobs
    how = Variant(
        variant, options=("--type", TYPE, *options), load=lambda db: load(db, [(TYPE, jobs)])
    )
    return drain(bench, dsn, workers, jobs, how)


def find(drains: Sequence[Drain], system: str, variant: str, workers: int) -> Drain | None:
    for d in drains:
        if (d.system, d.variant, d.workers, d.database) == (system, variant, workers, "postgresql"):
            return d
    return None


def section(
    bench: Bench, dsn: str, pgqueuer: tuple[Peer, int] | None, measure: Measure
) -> list[tuple[str, Callable[[], Recovery]]]:
    """Every drain of the section, one W at a time with every system back to back (as the
    throughput steps do); returns the crash tests to run, named."""
    s = bench.settings
    variants = VARIANTS
    if not has_prefetch(bench):
        bench.note("jobq-supervise has no --prefetch here: jobq measured one at a time only")
        variants = ((ONE_AT_A_TIME, ()),)
    for w in s.workers:
        for variant, options in variants:
            measure(f"jobq {variant} W={w}", partial(jobq_drain, bench, dsn, w, variant, options))
        if pgqueuer is None:
            continue
        peer, best = pgqueuer
        for variant, setting in (("default", peer.default_setting()), ("best", best)):
            # The peers section's drain of the same run, when it has one, is not repeated.
            if find(bench.drains, peer.name, variant, w) is None and (
                variant == "default" or best != peer.default_setting()
            ):
                run = partial(peer.drain, w, s.prefetch_jobs, setting, variant)
                measure(f"{peer.name} {variant} W={w}", run)
    tests: list[tuple[str, Callable[[], Recovery]]] = [
        (f"jobq crash, {v}", partial(crash.jobq_recovery, bench, dsn, v, o, v != ONE_AT_A_TIME))
        for v, o in variants
    ]
    if pgqueuer is not None:
        peer, _ = pgqueuer
        tests.append((f"{peer.name} crash", partial(crash.pgqueuer_recovery, bench, peer)))
    return tests


def ratio(a: Drain | None, b: Drain | None) -> str:
    if a is None or b is None or a.rate <= 0 or b.rate <= 0:
        return "-"
    return f"{a.rate / b.rate:.2f}x"


def rate(d: Drain | None) -> str:
    return "-" if d is None else f"{d.rate:,.0f}" + ("" if d.ok else "*")


def pgq_default(drains: Sequence[Drain], w: int) -> Drain | None:
    return find(drains, "pgqueuer", "default", w)


def pgq_best(drains: Sequence[Drain], w: int) -> Drain | None:
    return find(drains, "pgqueuer", "best", w) or pgq_default(drains, w)


def table(drains: Sequence[Drain], workers: Sequence[int]) -> list[str]:
    prefetched = [v for v, _ in VARIANTS if v != ONE_AT_A_TIME]
    header = ["W", "jobq --prefetch 1", *(f"jobq {v}" for v in prefetched)]
    header += ["pgqueuer default", "pgqueuer best"]
    for v in prefetched:
        header += [f"{v} / prefetch 1", f"{v} / pgqueuer default"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for w in workers:
        one = find(drains, "jobq", ONE_AT_A_TIME, w)
        row = [str(w), rate(one), *(rate(find(drains, "jobq", v, w)) for v in prefetched)]
        row += [rate(pgq_default(drains, w)), rate(pgq_best(drains, w))]
        for v in prefetched:
            d = find(drains, "jobq", v, w)
            row += [ratio(d, one), ratio(d, pgq_default(drains, w))]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def targets(drains: Sequence[Drain]) -> list[str]:
    """The issue's two targets at W = 8, for the fixed and the adaptive prefetch."""
    w = TARGET_WORKERS
    one, pgq = find(drains, "jobq", ONE_AT_A_TIME, w), pgq_default(drains, w)
    lines = []
    for variant in (FIXED, "prefetch adaptive"):
        d = find(drains, "jobq", variant, w)
        if d is None or d.rate <= 0:
            continue
        if one is not None and one.rate > 0:
            verdict = "met" if d.rate >= TARGET_SPEEDUP * one.rate else "MISSED"
            lines.append(
                f"- jobq {variant} >= 2x jobq one at a time at W={w}: {d.rate:,.0f} vs "
                f"{one.rate:,.0f} jobs/s ({d.rate / one.rate:.2f}x): **{verdict}**"
            )
        if pgq is not None and pgq.rate > 0:
            verdict = "met" if d.rate > pgq.rate else "MISSED"
            lines.append(
                f"- jobq {variant} ahead of pgqueuer's default (batch 10) at W={w}: "
                f"{d.rate:,.0f} vs {pgq.rate:,.0f} jobs/s: **{verdict}**"
            )
    return lines


def seconds(values: Sequence[float]) -> str:
    return "-" if not values else f"{statistics.median(values):.2f} / {max(values):.2f}"


def markdown(drains: Sequence[Drain], recoveries: Sequence[Recovery], jobs: int,
             workers: Sequence[int]) -> list[str]:  # fmt: skip
    """The section of RESULTS.md; empty when the section did not run."""
    if not any(d.variant.startswith("prefetch") for d in drains) and not recoveries:
        return []
    lines = [
        "## Prefetch: several jobs per claim (issue 18)",
        "",
        f"{jobs:,} no-op jobs of one type enqueued in bursts of enqueue_many, drained by "
        f"`jobq-supervise --type {TYPE}` with `--prefetch 1` (one at a time), `--prefetch 10` "
        "and the adaptive default, and by pgqueuer with its default batch of 10 and its best "
        "batch from the sweep (the peers section's drains when the run has them: preloaded "
        "untyped jobs, its own job count). jobs/s from completion times, as above; ratios "
        "are jobq's jobs/s over the other's at the same W.",
        "",
        *table(drains, workers),
        "",
        "### Targets (issue 18)",
        "",
        *(targets(drains) or ["- not measured at W = 8 in this run"]),
        "",
    ]
    if recoveries:
        lines += [
            "### Recovery delay after a worker crash",
            "",
            "A worker holding jobs is killed with SIGKILL; the delay runs from the kill to the "
            "last of its jobs completed by another worker (or by the child the master starts "
            "in its place). 'unstarted': the jobs whose only counted attempt is the one that "
            "completed them, i.e. released by the master without counting one; 'all': these "
            "and the job that was running, failed by the master and retried after its "
            "backoff. 'extra attempts': attempts counted beyond the completing ones. "
            "pgqueuer: one process is killed once it has picked jobs and another started "
            "right after; its jobs run at once, concurrently, so none is unstarted, and they "
            "wait for the heartbeat timeout.",
            "",
            "| system | setting | kills | jobs held per kill | unstarted: delay s, median / max "
            "| all: delay s, median / max | extra attempts | note |",
            "|---|---|---|---|---|---|---|---|",
            *(
                f"| {r.system} | {r.settings} | {len(r.held)} | "
                f"{', '.join(map(str, r.held)) or '-'} | {seconds(r.released_delays)} | "
                f"{seconds(r.delays)} | {r.extra_attempts if r.system == 'jobq' else '-'} "
                f"| {r.note} |"
                for r in recoveries
            ),
            "",
        ]
    return lines
