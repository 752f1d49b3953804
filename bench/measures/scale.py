"""Scale: claims behind big backlogs, as applications load a queue.

Every other drain preloads copies of one job and runs VACUUM ANALYZE first. Here the queue is
loaded the way producers load it: bursts of enqueue_many, one transaction each, several job
types, and statistics as autovacuum leaves them. Each drain runs `jobq-supervise` (typed or
not) until `measured` jobs are done and takes the rate from their completion times, so a
drain behind a million jobs costs the same time as one behind ten thousand.

Then enqueue() in a loop against enqueue_many(), each inside one transaction of the
application's connection.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..harness.app import Noop
from ..harness.context import REPO, Bench
from ..harness.jobqdb import DATABASE_NAMES, JobqDb, exited, supervise_cmd, wait_drained
from ..harness.memory import PeakMemory
from ..harness.results import Drain, EnqueueRate

# Jobs per transaction when loading a backlog.
BURST = 50_000

# Per database kind: turn the jobs table's automatic statistics off, and on again.
AUTO_STATISTICS = {
    "postgresql": (
        "ALTER TABLE jobq_jobs SET (autovacuum_enabled = off)",
        "ALTER TABLE jobq_jobs RESET (autovacuum_enabled)",
    ),
    "mysql": (
        "ALTER TABLE jobq_jobs STATS_AUTO_RECALC = 0",
        "ALTER TABLE jobq_jobs STATS_AUTO_RECALC = DEFAULT",
    ),
}


def analyze(db: JobqDb) -> None:
    if db.kind == "mysql":
        db.rows("ANALYZE TABLE jobq_jobs")  # answers with a status row to read
    else:
        db.execute("ANALYZE jobq_jobs" if db.kind == "postgresql" else "ANALYZE")


@dataclass(frozen=True)
class Sizes:
    small: int  # the reference backlog
    large: int  # the big one
    measured: int  # jobs each drain runs before it is stopped
    workers: int


@dataclass(frozen=True)
class Scenario:
    name: str
    # (type, jobs) bursts, oldest first; "other" jobs are scheduled an hour earlier.
    backlog: Callable[[Sizes], list[tuple[str, int]]]
    typed: bool  # workers run --type a, else every type
    reference: str | None  # the scenario at the small backlog this one is held against
    stale: bool = False  # statistics taken before the backlog, then no automatic ones


def mixed(jobs: int) -> list[tuple[str, int]]:
    """Two types, a and b, in alternating bursts."""
    bursts = []
    while jobs > 0:
        for name in ("a", "b"):
            size = min(BURST // 2, jobs)
            if size:
                bursts.append((name, size))
            jobs -= size
    return bursts


def small(sizes: Sizes) -> list[tuple[str, int]]:
    return mixed(sizes.small)


def large(sizes: Sizes) -> list[tuple[str, int]]:
    return mixed(sizes.large)


def behind_other(sizes: Sizes) -> list[tuple[str, int]]:
    return [("other", sizes.large), *mixed(sizes.small)]


UNTYPED, TYPED = "untyped, small backlog", "typed, small backlog"  # the references

SCENARIOS = (
    Scenario(UNTYPED, small, typed=False, reference=None),
    Scenario("untyped, large backlog", large, typed=False, reference=UNTYPED),
    Scenario(TYPED, small, typed=True, reference=None),
    Scenario("typed, large backlog", large, typed=True, reference=TYPED),
    Scenario("typed, behind a large backlog of another type", behind_other, True, TYPED),
    Scenario("typed, after a large burst, stale statistics", large, True, TYPED, stale=True),
)


def load(db: JobqDb, bursts: Sequence[tuple[str, int]]) -> float:
    """Enqueue the bursts, each in one transaction; returns the seconds it took."""
    earlier = datetime.now(UTC) - timedelta(hours=1)
    start = time.perf_counter()
    for name, jobs in bursts:
        for done in range(0, jobs, BURST):
            db.burst(min(BURST, jobs - done), name, earlier if name == "other" else None)
    return time.perf_counter() - start


def maintenance_runs(db: JobqDb) -> int:
    """How many times autovacuum has vacuumed or analyzed the jobs table (PostgreSQL): one
    that lands in a measured drain takes CPU from it."""
    if db.kind != "postgresql":
        return 0
    return int(
        db.scalar(
            "SELECT autovacuum_count + autoanalyze_count FROM pg_stat_user_tables "
            "WHERE relname = 'jobq_jobs'"
        )
    )


# Set on the connection that polls a PostgreSQL drain (see finished()).
INDEX_ONLY = ("SET enable_seqscan = off", "SET enable_bitmapscan = off")


def finished(db: JobqDb) -> Callable[[], int]:
    """How many jobs are finished, read five times a second while a drain runs.

    The partial index of finished rows answers it without reading the backlog, but only if
    the planner picks it. After TRUNCATE, PostgreSQL knows no row count, and the last
    statistics (from a drain that finished every job) call most rows finished: it read all
    1,000,000 rows per poll (190 ms at 300,000), half a core taken from the large drain
    until autoanalyze came. So the poll's connection reads through indexes only."""
    if db.kind == "postgresql":
        for setting in INDEX_ONLY:
            db.execute(setting)
    return lambda: int(db.scalar("SELECT count(*) FROM jobq_jobs WHERE finished_at IS NOT NULL"))


def drain(bench: Bench, dsn: str, scenario: Scenario, sizes: Sizes) -> Drain:
    """Load the scenario's backlog, run the workers until `measured` jobs are done (all of
    type a when typed), and read the rate from their completion times."""
    db = JobqDb(dsn)
    database = DATABASE_NAMES[db.kind]
    bursts = scenario.backlog(sizes)
    backlog = sum(jobs for _, jobs in bursts)
    wanted = sum(jobs for name, jobs in bursts if name == "a" or not scenario.typed)
    measured = min(sizes.measured, wanted)
    types = ("--type", "a") if scenario.typed else ()
    result = Drain(
        "jobq",
        scenario.name,
        database,
        sizes.workers,
        measured,
        settings=f"backlog {backlog:,}; jobq-supervise --workers {sizes.workers} {' '.join(types)}",
    )
    try:
        db.reset()
        if scenario.stale and db.kind in AUTO_STATISTICS:
            db.execute(AUTO_STATISTICS[db.kind][0])
        if scenario.stale:
            load(db, [("a", 1000)])
            analyze(db)
        seconds = load(db, bursts)
        bench.say(f"{database}: loaded {backlog:,} jobs in {seconds:.1f} s ({scenario.name})")
        # The load's writes go to disk now, not in a checkpoint during the measured drain
        # (a large backlog would pay for it and a small one not). No VACUUM, no ANALYZE.
        if db.kind == "postgresql":
            db.execute("CHECKPOINT")
        elif db.kind == "sqlite":
            db.rows("PRAGMA wal_checkpoint(TRUNCATE)")
        result.load = os.getloadavg()[0]
        proc = bench.procs.spawn(
            f"scale-{database}",
            supervise_cmd(dsn, sizes.workers, *types),
            env=bench.env(),
            cwd=REPO,
        )
        done = finished(db)
        autovacuum = maintenance_runs(db)
        with PeakMemory([proc.pid]) as memory:
            result.wall, result.note, _ = wait_drained(
                lambda: max(measured - done(), 0),
                measured,
                exited(bench, proc),
                poll=0.2,
            )
        result.memory = memory.summary
        bench.procs.stop(proc, signal.SIGTERM, grace=45.0)
        if ran := maintenance_runs(db) - autovacuum:
            result.note = ", ".join(filter(None, [result.note, f"{ran} autovacuum run(s)"]))
        result.completed, result.after_first, result.span, _ = db.completion(measured)
        result.jobs = result.completed
    finally:
        if scenario.stale and db.kind in AUTO_STATISTICS:
            db.execute(AUTO_STATISTICS[db.kind][1])
        db.close()
    return result


def enqueue_rates(dsn: str, jobs: int) -> list[EnqueueRate]:
    """enqueue() in a loop for a tenth of `jobs`, and enqueue_many() for `jobs`, each in one
    transaction, commit included, jobs made beforehand."""
    db = JobqDb(dsn)
    database = DATABASE_NAMES[db.kind]
    queue = db.queue
    found = []
    try:
        methods = ["enqueue in a loop", "enqueue_many"]
        if not hasattr(queue, "enqueue_many"):
            methods.pop()  # code from before it (--jobq-at)
        for method in methods:
            db.reset()
            count = jobs if method == "enqueue_many" else jobs // 10
            batch = [Noop() for _ in range(count)]
            start = time.perf_counter()
            if method == "enqueue_many":
                queue.enqueue_many(batch)
            else:
                with queue.backend.transaction():
                    for job in batch:
                        queue.enqueue(job)
            found.append(EnqueueRate(database, method, count, time.perf_counter() - start))
    finally:
        db.close()
    return found


def targets(drains: Sequence[Drain], rates: Sequence[EnqueueRate]) -> list[str]:
    """Every large-backlog drain against its small-backlog reference, and enqueue_many on
    PostgreSQL, with a verdict each."""
    lines = []
    by_name = {(d.database, d.variant): d for d in drains}
    for scenario in SCENARIOS:
        for database in dict.fromkeys(d.database for d in drains):
            d = by_name.get((database, scenario.name))
            ref = by_name.get((database, scenario.reference or ""))
            if d is None or ref is None or ref.rate <= 0:
                continue
            share = d.rate / ref.rate
            verdict = "met" if share >= TARGET_SHARE else "MISSED"
            lines.append(
                f"- {database}, {scenario.name}: {d.rate:,.0f} jobs/s, {share:.2f}x "
                f"{scenario.reference} ({ref.rate:,.0f}): **{verdict}**"
            )
    for r in rates:
        if r.database == "postgresql" and r.method == "enqueue_many":
            verdict = "met" if r.rate >= TARGET_ENQUEUE_MANY else "MISSED"
            lines.append(
                f"- enqueue_many on PostgreSQL >= 50,000 jobs/s: {r.rate:,.0f}: **{verdict}**"
            )
    return lines


TARGET_SHARE = 0.8
TARGET_ENQUEUE_MANY = 50_000.0


def markdown(
    drains: Sequence[Drain], rates: Sequence[EnqueueRate], sizes: dict[str, Any]
) -> list[str]:
    """The section of RESULTS.md."""
    lines = [
        "## At scale: backlogs, other types, stale statistics, bulk enqueue",
        "",
        "Loaded as applications load a queue: bursts of enqueue_many of up to "
        f"{BURST:,} jobs, one transaction each, job types a and b alternating (and 'other', "
        "scheduled an hour earlier, where named), statistics as autovacuum leaves them: no "
        "VACUUM ANALYZE (a CHECKPOINT after loading, so that the load's writes do not land in "
        "the measured drain). 'stale statistics': the table's automatic statistics off, ANALYZE "
        "taken with 1,000 jobs in it, then the burst. Each drain stops after its measured "
        "jobs; jobs/s from their completion times. Sizes: "
        + ", ".join(f"{k} {v}" for k, v in sizes.items())
        + ".",
        "",
        "| database | scenario | backlog and workers | jobs measured | jobs/s | wall s | note |",
        "|---|---|---|---|---|---|---|",
        *(
            f"| {d.database} | {d.variant} | {d.settings} | {d.completed:,} | {d.rate:,.0f} "
            f"| {d.wall:.1f} | {d.note} |"
            for d in drains
        ),
        "",
        "| database | enqueue | jobs in one transaction | seconds | jobs/s |",
        "|---|---|---|---|---|",
        *(
            f"| {r.database} | {r.method} | {r.jobs:,} | {r.seconds:.2f} | {r.rate:,.0f} |"
            for r in rates
        ),
        "",
        "### Targets (issue 12)",
        "",
        *targets(drains, rates),
        "",
    ]
    return lines
