"""I/O-bound jobs (issue 27): jobs that each wait 100 ms (bench/harness/app.py's IO_WAIT), as
an HTTP call or an SMTP send does, drained by jobq's concurrent worker (`--concurrency`:
coroutine jobs on its event loop, blocking jobs in its threads), by plain jobq process
workers, and by pgqueuer and procrastinate at the settings a sweep in the same run finds
best; jobs/s and the peak memory summed over all of each system's processes.

Here a system's rate is bounded by how many jobs it runs at once (the ceiling: that number
over IO_WAIT), not by the database, so the table shows each one's cap beside its rate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import jobq

from ..harness.app import IO_WAIT, AsyncWait, Wait
from ..harness.context import Bench
from ..harness.jobqdb import JobqDb
from ..harness.memory import MIB
from ..harness.results import Drain
from ..peers.peer import Peer
from .drain import Variant, drain

WORKERS = 2  # the W of the targets
COROUTINES = 100  # --concurrency for coroutine jobs
THREADS = 50  # --concurrency for blocking jobs
# Coroutines again, as many at once as pgqueuer's largest candidate: whether a miss is the
# cap's or jobq's own cost per job. The targets are judged on COROUTINES, the first.
COROUTINES_MATCHED = 200
PROCESS_WORKERS = (WORKERS, 16)  # plain process workers: the same W, and eight times more
PROCESS_SECONDS = 15.0  # what a process drain is sized to last (at its ceiling)
TYPES = ("a", "b")  # bursts alternate between two job types; the workers serve both
BURST = 1000  # jobs per enqueue_many, one transaction each

# The peers' candidates. pgqueuer: (batch_size, max_concurrent_tasks), the cap at least twice
# the batch as it requires; up to 200 at once per process, the issue's own best, twice jobq's
# 100. procrastinate: --concurrency (its pool one connection more per job, plus two).
PEER_SETTINGS: dict[str, tuple[tuple[int, int | None], ...]] = {
    "pgqueuer": ((10, 100), (50, 100), (50, 200), (100, 200)),
    "procrastinate": ((50, None), (100, None)),
}

TARGET_COROUTINES = 1.0  # coroutine jobs at --concurrency 100 over pgqueuer's best, at W=2
TARGET_THREADS = 0.5  # blocking jobs in threads at --concurrency 50 over the same
TARGET_MEMORY = 1.5  # jobq's peak summed PSS over pgqueuer's best's, at most (issue 60)

Record = Callable[[str, Callable[[], Drain]], Drain | None]


def variant(kind: str, at_once: int) -> str:
    """A drain's variant names how its jobs run and how many run at once, at most."""
    return f"{kind}, {at_once} at once"


def ceiling(d: Drain) -> float:
    """The most jobs/s a system that runs the variant's number at once could reach."""
    return int(d.variant.rsplit(", ", 1)[1].split()[0]) / IO_WAIT


def bursts(job: Callable[[], jobq.Job], jobs: int) -> Callable[[JobqDb], object]:
    """The jobq load: bursts of enqueue_many, alternating between TYPES."""

    def load(db: JobqDb) -> None:
        for i, start in enumerate(range(0, jobs, BURST)):
            db.burst(min(BURST, jobs - start), TYPES[i % len(TYPES)], None, job)

    return load


def jobq_drains(bench: Bench, dsn: str, jobs: int) -> list[tuple[str, Callable[[], Drain]]]:
    """jobq's drains, named: coroutines, threads, then plain processes at each W."""
    runs: list[tuple[str, Callable[[], Drain]]] = []
    for kind, job, concurrency in (
        ("coroutines", AsyncWait, COROUTINES),
        ("threads", Wait, THREADS),
        ("coroutines", AsyncWait, COROUTINES_MATCHED),
    ):
        how = Variant(
            variant(kind, WORKERS * concurrency),
            options=("--concurrency", str(concurrency)),
            load=bursts(job, jobs),
        )
        what = f"jobq {kind} --concurrency {concurrency} W={WORKERS}"
        runs.append((what, partial(drain, bench, dsn, WORKERS, jobs, how)))
    for w in PROCESS_WORKERS:
        n = min(jobs, int(w / IO_WAIT * PROCESS_SECONDS))
        how = Variant(variant("processes", w), load=bursts(Wait, n))
        runs.append((f"jobq processes W={w}", partial(drain, bench, dsn, w, n, how)))
    return runs


def peer_drains(peer: Peer, jobs: int) -> list[tuple[str, Callable[[], Drain]]]:
    runs: list[tuple[str, Callable[[], Drain]]] = []
    for setting, most in PEER_SETTINGS.get(peer.name, ()):
        at_once = WORKERS * (setting if most is None else most)
        run = partial(peer.drain, WORKERS, jobs, setting, variant("async", at_once), "wait", most)
        runs.append((f"{peer.name} {peer.describe(setting, most)}", run))
    return runs


def section(bench: Bench, dsn: str, peers: Sequence[Peer], record: Record) -> list[Drain]:
    """Every drain of the section, back to back, recorded and returned."""
    jobs = bench.settings.io_jobs
    runs = jobq_drains(bench, dsn, jobs)
    for peer in peers:
        runs += peer_drains(peer, jobs)
    found = []
    for what, run in runs:
        d = record(what, run)
        if d is not None:
            found.append(d)
            rss, pss, uss = mib(d)
            bench.say(f"{what}: {d.rate:,.0f} jobs/s, MiB RSS {rss}, PSS {pss}, USS {uss} {d.note}")
    return found


def best(drains: Sequence[Drain], system: str) -> Drain | None:
    """The system's fastest drain that completed every job cleanly."""
    clean = [d for d in drains if d.system == system and d.ok and d.rate > 0]
    return max(clean, key=lambda d: d.rate, default=None)


def jobq_run(drains: Sequence[Drain], kind: str) -> Drain | None:
    return next(
        (d for d in drains if d.system == "jobq" and d.variant.startswith(kind + ",")), None
    )


def mib(d: Drain) -> tuple[str, str, str]:
    """Peak summed RSS (with the process count), PSS and USS in MiB."""
    if d.memory is None:
        return "-", "-", "-"
    m = d.memory.peak
    return f"{m.rss / MIB:,.0f} ({m.processes})", f"{m.pss / MIB:,.0f}", f"{m.uss / MIB:,.0f}"


def table(drains: Sequence[Drain]) -> list[str]:
    pgq = best(drains, "pgqueuer")
    lines = [
        "| system | jobs run as | W | ceiling jobs/s | jobs | jobs/s | / pgqueuer best "
        "| peak RSS MiB, summed (processes) | peak PSS MiB | peak USS MiB | client CPU ms/job "
        "| PostgreSQL CPU ms/job | settings | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in drains:
        star = "" if d.ok else "*"
        share = f"{d.rate / pgq.rate:.2f}x" if pgq is not None and pgq.rate > 0 else "-"
        rss, pss, uss = mib(d)
        mark = " (best)" if d.system != "jobq" and d is best(drains, d.system) else ""
        lines.append(
            f"| {d.system}{mark} | {d.variant} | {d.workers} | {ceiling(d):,.0f} | {d.jobs:,} "
            f"| {d.rate:,.0f}{star} | {share} | {rss} | {pss} | {uss} "
            f"| {d.per_job_ms(d.client_cpu)} | {d.per_job_ms(d.db_cpu)} | {d.settings} | {d.note} |"
        )
    return lines


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def same_cap(drains: Sequence[Drain], d: Drain) -> str:
    """jobq's drain against pgqueuer's best with as many jobs at once: how much of a miss
    is the cap's, and how much jobq's own cost per job."""
    cap = d.variant.rsplit(", ", 1)[1]
    peer = best([p for p in drains if p.variant.endswith(", " + cap)], "pgqueuer")
    if peer is None:
        return ""
    return (
        f" (pgqueuer's best at {cap}: {peer.rate:,.0f} jobs/s, jobq {d.rate / peer.rate:.2f}x it)"
    )


def targets(drains: Sequence[Drain]) -> list[str]:
    """The issue's three targets at W=2 against pgqueuer's best drain of this run."""
    pgq = best(drains, "pgqueuer")
    if pgq is None:
        return ["- pgqueuer not measured cleanly in this run: no verdict"]
    lines = []
    for kind, target in (("coroutines", TARGET_COROUTINES), ("threads", TARGET_THREADS)):
        d = jobq_run(drains, kind)
        if d is None or not d.ok:
            lines.append(f"- jobq {kind}: not measured cleanly in this run: **MISSED**")
            continue
        share = d.rate / pgq.rate
        lines.append(
            f"- jobq {kind} ({d.variant}) >= {target:.1f}x pgqueuer's best at W={WORKERS}: "
            f"{d.rate:,.0f} vs {pgq.rate:,.0f} jobs/s ({share:.2f}x): "
            f"**{verdict(share >= target)}**{same_cap(drains, d)}"
        )
        if d.memory is not None and pgq.memory is not None and pgq.memory.peak.pss > 0:
            ours, theirs = d.memory.peak.pss, pgq.memory.peak.pss
            lines.append(
                f"- jobq {kind}: peak summed PSS <= {TARGET_MEMORY:g}x pgqueuer's best "
                f"(issue 60): {ours / MIB:,.0f} vs {theirs / MIB:,.0f} MiB "
                f"({ours / theirs:.1f}x): **{verdict(ours / theirs <= TARGET_MEMORY)}**"
            )
    return lines


def markdown(drains: Sequence[Drain], jobs: int) -> list[str]:
    """The section of RESULTS.md; empty when the section did not run."""
    if not drains:
        return []
    return [
        "## I/O-bound jobs: many at once in one worker (issue 27)",
        "",
        f"Jobs that each wait {IO_WAIT * 1000:.0f} ms ({jobs:,} per drain; plain process "
        f"workers {PROCESS_SECONDS:g} s worth at their ceiling), on PostgreSQL. jobq's jobs are "
        f"enqueued in bursts of {BURST:,} by enqueue_many, alternating between types "
        f"{' and '.join(TYPES)}, and served by untyped workers: `jobq-supervise --workers "
        f"{WORKERS} --concurrency {COROUTINES}` for `async def handle` jobs awaiting "
        f"`asyncio.sleep`, `--concurrency {THREADS}` for `def handle` jobs calling "
        "`time.sleep` in the worker's threads, coroutines again at `--concurrency "
        f"{COROUTINES_MATCHED}` (as many at once as pgqueuer's largest candidate), and plain "
        "process workers (one job at a time) for comparison. The peers run async jobs "
        "awaiting `asyncio.sleep`, preloaded in "
        "batches of 1,000, with W processes at each candidate setting; the best is the "
        "fastest clean drain. 'ceiling': jobs run at once over the wait, the rate a system "
        "with no cost of its own would reach. Memory: the largest sum over all of the "
        "system's processes (jobq: master, workers, renewer, housekeeper, fence keeper), "
        "sampled every "
        "0.25 s while it drained, each column's own peak; RSS counts a page shared by forked "
        "processes once per process, PSS splits it between them (what a memory limit on the "
        "node counts), USS is the private pages alone. jobs/s from completion times, as above.",
        "",
        *table(drains),
        "",
        f"### Targets at W = {WORKERS} (issue 27)",
        "",
        *targets(drains),
        "",
    ]
