"""Prefetch (issue 18): jobq claiming several jobs per statement, against jobq one at a time
and pgqueuer, and what a worker crash costs each in recovery delay.

The drains load their jobs as applications do (bursts of enqueue_many of one type) and run
typed workers (`--type a`); then VACUUM ANALYZE and CHECKPOINT, as for every other drain.
pgqueuer's drains are the peers section's when the same run has them, else measured here.

The crash test runs short sleeping jobs under `jobq-supervise --workers 2`, SIGKILLs the child
holding the most jobs and times how long its jobs wait: from the kill to the last of them
completed elsewhere. pgqueuer's worker is killed the same way and its jobs wait for its
heartbeat timeout.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import psutil

from .app import Sleep
from .context import PYTHON, REPO, Bench
from .jobqdb import JobqDb, drain, supervise_cmd
from .peers import Peer
from .results import Drain, Recovery
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

# The crash test: jobs long enough that a child killed while holding a batch has mostly
# unstarted jobs in it, short enough that a batch is fetched several times a second.
# A child reports its claim to the master just after the claim commits; one killed in between
# leaves its jobs to their lease (see the README). A crash lands there rarely, a kill timed on
# the claim itself often: the test kills a child only once it shows a job running.
CRASH_JOB_SECONDS = 0.04
CRASH_WORKERS = 2
CRASH_JOBS = 400
HOLDER_TIMEOUT = 15.0  # for a child to hold jobs to kill
RECOVERY_TIMEOUT = 60.0  # for the killed child's jobs to be completed elsewhere
# pgqueuer.run()'s default staleness threshold for re-picking a job (heartbeats at half it).
PGQ_HEARTBEAT_TIMEOUT = 30.0

Measure = Callable[[str, Callable[[], Drain]], None]


def has_prefetch(bench: Bench) -> bool:
    """Whether the jobq measured has `--prefetch` (code from before it, by --jobq-at, not)."""
    cmd = [PYTHON, "-m", "jobq.supervisor", "--help"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO,
                         env=bench.env(), check=False)  # fmt: skip
    return "--prefetch" in out.stdout


def jobq_drain(bench: Bench, dsn: str, workers: int, variant: str, options: Sequence[str]) -> Drain:
    jobs = bench.settings.prefetch_jobs
    return drain(
        bench,
        dsn,
        workers,
        jobs,
        variant=variant,
        options=("--type", TYPE, *options),
        load=lambda db: load(db, [(TYPE, jobs)]),
    )


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
        (f"jobq crash, {v}", partial(jobq_recovery, bench, dsn, v, o)) for v, o in variants
    ]
    if pgqueuer is not None:
        peer, _ = pgqueuer
        tests.append((f"{peer.name} crash", partial(pgqueuer_recovery, bench, peer)))
    return tests


@dataclass
class Held:
    pid: int
    ids: list[int]


def holder(db: JobqDb, least: int, supervisor: subprocess.Popen[bytes]) -> Held | None:
    """The worker child holding the most jobs, if it holds at least `least` and is running
    one of them: then its master knows the claim (see CRASH_JOB_SECONDS)."""
    rows = db.rows(
        "SELECT pid, array_agg(id ORDER BY id) FROM jobq_jobs WHERE status = 'in_progress' "
        "GROUP BY pid ORDER BY count(*) DESC LIMIT 1"
    )
    if not rows or len(rows[0][1]) < least:
        return None
    pid = int(rows[0][0])
    try:
        child = next(p for p in psutil.Process(supervisor.pid).children() if p.pid == pid)
        # Its process title, set once the claim is reported: "jobq-supervise: worker job …".
        if "worker job" not in " ".join(child.cmdline()):
            return None
    except (StopIteration, psutil.NoSuchProcess):
        return None
    return Held(pid, [int(i) for i in rows[0][1]])


def until(check: Callable[[], Any], timeout: float, poll: float = 0.005) -> Any:
    """Poll `check()` until it answers something true; None after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(poll)
    return None


def kill_child(supervisor: subprocess.Popen[bytes], pid: int) -> bool:
    """SIGKILL one of the supervisor's own worker children (never any other process)."""
    try:
        if pid not in {p.pid for p in psutil.Process(supervisor.pid).children()}:
            return False
        os.kill(pid, signal.SIGKILL)
    except (psutil.NoSuchProcess, ProcessLookupError):
        return False
    return True


@dataclass
class Completed:
    """The killed child's jobs once all are completed: epoch seconds of the last completion,
    of all and of those whose attempt was not counted (released unstarted), and the
    attempts counted."""

    last: float
    last_released: float | None
    attempts: int


def recovered(db: JobqDb, ids: list[int]) -> Completed | None:
    row = db.queue.backend.fetchall(
        "SELECT count(*) FILTER (WHERE status = 'completed'), extract(epoch FROM "
        "max(finished_at)), extract(epoch FROM max(finished_at) FILTER (WHERE attempts = 1)), "
        "sum(attempts) FROM jobq_jobs WHERE id = ANY(%s)",
        (ids,),
    )[0]
    if int(row[0]) != len(ids):
        return None
    return Completed(float(row[1]), None if row[2] is None else float(row[2]), int(row[3]))


def waiting(db: JobqDb, ids: list[int]) -> str:
    """What the jobs not yet completed are waiting for: status, attempts, error, when due."""
    rows = db.queue.backend.fetchall(
        "SELECT status, attempts, coalesce(last_error, ''), "
        "extract(epoch FROM scheduled_at - now()), extract(epoch FROM lease_until - now()), "
        "count(*) FROM jobq_jobs WHERE id = ANY(%s) AND status <> 'completed' "
        "GROUP BY 1, 2, 3, 4, 5",
        (ids,),
    )
    return "; ".join(
        f"{n} {status}, {attempts} attempt(s), error {error.splitlines()[0][:80] if error else '-'}"
        + (f", due in {float(due):.0f} s" if due is not None else "")
        + (f", lease ends in {float(lease):.0f} s" if lease is not None else "")
        for status, attempts, error, due, lease, n in rows
    )


def jobq_recovery(bench: Bench, dsn: str, variant: str, options: Sequence[str]) -> Recovery:
    """`prefetch_kills` rounds, each on a fresh backlog: kill the child holding the most jobs
    and wait for them."""
    flags = ("--type", "sleep", *options)
    result = Recovery(
        "jobq",
        variant,
        f"jobq-supervise --workers {CRASH_WORKERS} {' '.join(flags)}; {CRASH_JOBS:,} jobs of "
        f"{CRASH_JOB_SECONDS * 1000:g} ms",
    )
    db = JobqDb(dsn)
    try:
        for _ in range(bench.settings.prefetch_kills):
            result.note = crash_round(bench, db, variant, flags, result)
            if result.note:
                break
    finally:
        db.close()
    return result


def crash_round(
    bench: Bench, db: JobqDb, variant: str, flags: Sequence[str], result: Recovery
) -> str:
    """One kill, added to `result`; what went wrong, or ""."""
    db.reset()
    db.queue.enqueue_many([Sleep(CRASH_JOB_SECONDS) for _ in range(CRASH_JOBS)])
    db.settle()
    cmd = supervise_cmd(db.dsn, CRASH_WORKERS, *flags)
    proc = bench.procs.spawn(f"jobq-crash-{variant.replace(' ', '-')}", cmd, env=bench.env(),
                             cwd=REPO)  # fmt: skip
    try:
        # One at a time, the one job is all a child holds; a batch of two or more has one
        # started at most.
        least = 1 if variant == ONE_AT_A_TIME else 2
        held = until(partial(holder, db, least, proc), HOLDER_TIMEOUT)
        if held is None:
            return f"no child held {least} jobs within {HOLDER_TIMEOUT:g} s"
        if not kill_child(proc, held.pid):
            return f"child {held.pid} was gone before the kill"
        killed = time.time()
        result.held.append(len(held.ids))
        done = until(partial(recovered, db, held.ids), RECOVERY_TIMEOUT, poll=0.05)
        if done is None:
            waits = waiting(db, held.ids)
            return f"jobs of a killed child not done after {RECOVERY_TIMEOUT:g} s: {waits}"
        result.delays.append(max(0.0, done.last - killed))
        if done.last_released is not None and variant != ONE_AT_A_TIME:
            result.released_delays.append(max(0.0, done.last_released - killed))
        result.extra_attempts += done.attempts - len(held.ids)
        return ""
    finally:
        bench.procs.stop(proc, signal.SIGTERM, grace=30.0)


async def pgq_fill(peer: Peer, jobs: int) -> None:
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries

    connection = await asyncpg.connect(peer.dsn)
    try:
        payload = str(CRASH_JOB_SECONDS).encode()
        await Queries(AsyncpgDriver(connection)).enqueue(
            ["sleep"] * jobs, [payload] * jobs, [0] * jobs
        )
    finally:
        await connection.close()


def pgq_picked(peer: Peer) -> list[int]:
    """The ids of the jobs picked (by the one process running)."""
    rows = peer.conn.execute("SELECT id FROM pgqueuer WHERE status = 'picked'").fetchall()
    return [int(r[0]) for r in rows]


def pgq_done(peer: Peer, ids: list[int]) -> float | None:
    """The last success, as epoch seconds, once every job has a 'successful' log row."""
    row = peer.conn.execute(
        "SELECT count(DISTINCT job_id), extract(epoch FROM max(created)) FROM pgqueuer_log "
        "WHERE status = 'successful' AND job_id = ANY(%s)",
        (ids,),
    ).fetchone()
    assert row is not None
    return float(row[1]) if int(row[0]) == len(ids) else None


def pgqueuer_recovery(bench: Bench, peer: Peer) -> Recovery:
    """pgqueuer with its default batch: one process, killed once it has picked jobs, and
    another; the picked jobs wait for the heartbeat timeout, then the other re-picks them."""
    setting = peer.default_setting()
    result = Recovery(
        peer.name,
        "default",
        f"{CRASH_WORKERS} processes, {peer.describe(setting)}, heartbeat_timeout "
        f"{PGQ_HEARTBEAT_TIMEOUT:g} s (pgqueuer.run's default); "
        f"{CRASH_JOB_SECONDS * 1000:g} ms jobs",
    )
    peer.reset()
    asyncio.run(pgq_fill(peer, CRASH_JOBS))
    peer.settle()
    cmd, extra = peer.worker_cmd(setting, drain=False)
    env = bench.env(**extra)
    victim = bench.procs.spawn(f"{peer.name}-crash-victim", cmd, env=env, cwd=REPO)
    # Killed as soon as it has picked jobs (a batch of short jobs is soon done); the other
    # process starts right after, its start-up far inside the heartbeat timeout.
    held = until(partial(pgq_picked, peer), HOLDER_TIMEOUT)
    bench.procs.send(victim, signal.SIGKILL)
    killed = time.time()
    bench.procs.stop(victim)
    if held is None:
        result.note = f"no jobs picked within {HOLDER_TIMEOUT:g} s"
        return result
    survivor = bench.procs.spawn(f"{peer.name}-crash-survivor", cmd, env=env, cwd=REPO)
    try:
        result.held.append(len(held))
        wait = PGQ_HEARTBEAT_TIMEOUT + RECOVERY_TIMEOUT
        done = until(partial(pgq_done, peer, held), wait, poll=0.1)
        if done is None:
            result.note = f"jobs of the killed process not done after {wait:g} s"
        else:
            result.delays.append(max(0.0, done - killed))
    finally:
        bench.procs.stop(survivor, signal.SIGTERM, grace=10.0)
    return result


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
