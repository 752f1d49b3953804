"""The master's renewal cost: one round for 10, 100 and 1,000 claims, and the master's own CPU
and memory while 16 children run long jobs.

Statements per round are counted by pg_stat_statements on the bench database (reset before
the rounds; nothing else runs there meanwhile), not assumed from the code.
"""

from __future__ import annotations

import signal
import statistics
import time
from dataclasses import astuple

import psutil

import jobq

from ..harness.app import Noop, Sleep
from ..harness.context import REPO, Bench
from ..harness.jobqdb import JobqDb, supervise_cmd
from ..harness.memory import processes_memory
from ..harness.results import Footprint, MasterLoad, RenewalRound

HELPERS = ("fence keeper", "renewer", "housekeeper")  # the master's helpers, by title

SIZES = (10, 100, 1000)
ROUNDS = 20

# Statements of everything but the counting itself.
COUNT_STATEMENTS = (
    "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements "
    "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND query NOT ILIKE '%pg_stat_statements%'"
)


def rounds(bench: Bench, dsn: str) -> list[RenewalRound]:
    """For each size: a fresh connection (as a newly started renewer has), ROUNDS rounds of
    renew_many over that many claims, the statements they ran, and their times."""
    db = JobqDb(dsn)
    claimer = jobq.Queue.connect(dsn, lease_duration=600)
    found: list[RenewalRound] = []
    try:
        db.reset()
        db.preload(Noop(), max(SIZES))
        db.settle()
        claims = []
        for _ in range(max(SIZES)):
            claim = claimer.claim()
            assert claim is not None, "the preloaded jobs ran out"
            claims.append((claim.id, claim.token))
        for size in SIZES:
            pairs = claims[:size]
            queue = jobq.Queue.connect(dsn, lease_duration=600)
            try:
                db.execute("SELECT pg_stat_statements_reset()")
                times = []
                extended = 0
                for _ in range(ROUNDS):
                    started = time.perf_counter()
                    extended = len(queue.renew_many(pairs))
                    times.append((time.perf_counter() - started) * 1000)
                statements = int(db.scalar(COUNT_STATEMENTS))
            finally:
                queue.close()
            found.append(
                RenewalRound(
                    claims=size,
                    rounds=ROUNDS,
                    early_ms=statistics.median(times[:4]),
                    steady_ms=statistics.median(times[-10:]),
                    max_ms=max(times),
                    statements_per_round=statements / ROUNDS,
                    extended=extended,
                )
            )
            r = found[-1]
            bench.say(
                f"renewal of {size} claims: rounds 1-4 {r.early_ms:.2f} ms, last 10 "
                f"{r.steady_ms:.2f} ms, {statements / ROUNDS:g} statements per round, "
                f"{extended} extended"
            )
    finally:
        claimer.close()
        db.close()
    return found


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def master_load(bench: Bench, dsn: str) -> MasterLoad:
    """16 children each running a long sleeping job, renewed every 2 s on a 20 s lease; the
    master's CPU share and RSS are sampled over a window while all 16 are busy."""
    s = bench.settings
    workers = s.master_jobs
    db = JobqDb(dsn)
    note = ""
    try:
        db.reset()
        db.preload(Sleep(s.master_job_seconds), workers)
        db.settle()
        # The timing rule: 2 + 2 x 2 + 1 + 2 + 2 = 11 s < 20 s.
        options = ["--lease", "20", "--renew-interval", "2", "--renew-timeout", "2",
                   "--kill-grace", "2", "--safety-margin", "2"]  # fmt: skip
        proc = bench.procs.spawn(
            "jobq-master-load", supervise_cmd(dsn, workers, *options), env=bench.env(), cwd=REPO
        )
        deadline = time.monotonic() + 30
        busy = 0
        while time.monotonic() < deadline:
            busy = int(db.scalar("SELECT count(*) FROM jobq_jobs WHERE status = 'in_progress'"))
            if busy >= workers or proc.poll() is not None:
                break
            time.sleep(0.1)
        if busy < workers:
            note = f"only {busy} of {workers} jobs were running when sampling began"
        master = psutil.Process(proc.pid)
        helpers = [
            child
            for child in master.children()
            if any(h in " ".join(child.cmdline()) for h in HELPERS)
        ]
        db.execute("SELECT pg_stat_statements_reset()")
        window = min(s.master_window, s.master_job_seconds - 5)
        wall0 = time.monotonic()
        master0 = cpu_seconds(master)
        helpers0 = sum(cpu_seconds(h) for h in helpers)
        master_rss = helpers_rss = 0.0
        master_memory = helpers_memory = Footprint(0, 0, 0, 0)
        low_lease = float("inf")
        while time.monotonic() - wall0 < window:
            master_rss = max(master_rss, master.memory_info().rss / 2**20)
            helpers_rss = max(helpers_rss, sum(h.memory_info().rss for h in helpers) / 2**20)
            master_memory = larger(master_memory, processes_memory([master.pid]))
            helpers_memory = larger(helpers_memory, processes_memory(h.pid for h in helpers))
            # The leases must keep moving: the shortest time left never nears zero.
            left = db.scalar(
                "SELECT extract(epoch FROM min(lease_until) - now()) FROM jobq_jobs "
                "WHERE status = 'in_progress'"
            )
            low_lease = min(low_lease, float(left if left is not None else 0.0))
            time.sleep(0.5)
        elapsed = time.monotonic() - wall0
        master_cpu = (cpu_seconds(master) - master0) / elapsed
        helpers_cpu = (sum(cpu_seconds(h) for h in helpers) - helpers0) / elapsed
        renew_calls = db.scalar(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements "
            "WHERE query ILIKE '%UPDATE jobq_jobs AS j%' AND query ILIKE '%unnest%' "
            "AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        still = int(db.scalar("SELECT count(*) FROM jobq_jobs WHERE status = 'in_progress'"))
        if still < workers:
            note += f"; only {still} jobs still in progress at the end of the window"
        note += f"; shortest lease left during the window {low_lease:.1f} s of 20 s"
        # Stop at once (QUIT): the bench has what it needs from the sleeping jobs.
        bench.procs.stop(proc, signal.SIGQUIT, grace=30.0)
    finally:
        db.close()
    return MasterLoad(
        workers=workers,
        window=elapsed,
        master_cpu_share=master_cpu,
        master_rss_mb=master_rss,
        helpers_cpu_share=helpers_cpu,
        helpers_rss_mb=helpers_rss,
        renew_statements=int(renew_calls),
        rounds_expected=elapsed / 2.0,
        in_progress=busy,
        note=note.strip("; "),
        master_memory=master_memory,
        helpers_memory=helpers_memory,
    )


def larger(a: Footprint, b: Footprint) -> Footprint:
    """Each sum's larger value of the two."""
    return Footprint(*(max(x, y) for x, y in zip(astuple(a), astuple(b), strict=True)))
