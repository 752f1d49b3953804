"""Durable jobs (issue 56): what a step costs, against DBOS Transact's, and how sleeping jobs
use workers.

- Per step: jobs of ten steps that each return at once (bench.harness.app.TenSteps)
  drained by `jobq-supervise --workers W`, alternately with the same body without steps
  (TenPlain), so that the machine's load falls on both alike; the cost of a step is the
  difference in worker time over the steps run. DBOS runs the same ten-step workflow on W
  threads of one process, on its own database of the same PostgreSQL server (DBOS is
  process-wide: bench/peers/dbos_steps.py, in a process of its own).
- Sleepers: N jobs each sleeping S seconds durably (app.Asleep) on 2 workers: the time from
  the supervisor's start to the last completion, against S; the workers hold none of them
  while they sleep.
No figure is asserted anywhere."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from ..harness.app import STEPS, Asleep, TenPlain, TenSteps
from ..harness.context import REPO, Bench
from ..harness.jobqdb import JobqDb, exited, supervise_cmd, wait_drained
from ..peers.peer import installed
from .drain import Variant, drain

STEPPED, PLAIN = "10 steps", "10 plain calls"


def variant(name: str, jobs: int) -> Variant:
    """A drain of `jobs` copies of the named job; the steps of the drain before go first
    (reset() truncates the jobs, and a TRUNCATE fires no trigger)."""
    job = TenSteps() if name == STEPPED else TenPlain()

    def load(db: JobqDb) -> None:
        db.execute("TRUNCATE jobq_steps")
        db.preload(job, jobs)

    return Variant(name, load=load)


@dataclass
class StepCost:
    system: str
    jobs_per_s: float
    ms_per_step: float | None  # worker time per step, over the same body without steps
    note: str = ""


def per_step(bench: Bench, dsn: str, workers: int, jobs: int, rounds: int) -> list[StepCost]:
    """jobq with and without steps, alternately `rounds` times; DBOS once, if installed."""
    spans: dict[str, list[float]] = {STEPPED: [], PLAIN: []}
    for _ in range(rounds):
        for name in (PLAIN, STEPPED):
            found = drain(bench, dsn, workers, jobs, variant(name, jobs))
            bench.say(f"jobq {name}, W={workers}: {found.rate:,.0f} jobs/s {found.note}")
            spans[name].append(found.span)
    plain, stepped = min(spans[PLAIN]), min(spans[STEPPED])
    extra = (stepped - plain) * workers / (jobs * STEPS) * 1000
    costs = [
        StepCost("jobq, no steps", jobs / plain, None),
        StepCost("jobq, 10 steps", jobs / stepped, extra),
    ]
    costs.append(dbos(bench, workers, jobs, plain))
    return costs


def dbos(bench: Bench, workers: int, jobs: int, plain: float) -> StepCost:
    if not installed("dbos"):
        return StepCost("DBOS Transact", 0.0, None, "not installed (pip install dbos)")
    assert bench.pg is not None
    dsn = bench.pg.create_database("bench_dbos")
    command = [sys.executable, "-m", "bench.peers.dbos_steps", dsn, str(jobs), str(workers)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        return StepCost("DBOS Transact", 0.0, None, f"failed: {done.stderr.strip()[-300:]}")
    span = json.loads(done.stdout.strip().splitlines()[-1])["span"]
    # Against jobq's drain without steps: what DBOS's steps cost beyond a job's own cost.
    ms = span * workers / (jobs * STEPS) * 1000
    note = f"{workers} threads in one process; {ms:.3f} ms of thread time per step, all in"
    return StepCost("DBOS Transact", jobs / span, None, note)


def sleepers(bench: Bench, dsn: str, jobs: int, seconds: float) -> tuple[float, str]:
    """N durable sleepers on 2 workers: seconds from the supervisor's start to the last
    completion, and any problem."""
    db = JobqDb(dsn)
    try:
        db.reset()
        db.queue.enqueue_many([Asleep(seconds) for _ in range(jobs)])
        db.settle()
        proc = bench.procs.spawn("jobq-sleepers", supervise_cmd(dsn, 2), env=bench.env(), cwd=REPO)
        start = time.monotonic()
        _, problem, _ = wait_drained(db.unfinished, jobs, exited(bench, proc), poll=0.5)
        took = time.monotonic() - start
        bench.procs.stop(proc, signal.SIGTERM, grace=45.0)
    finally:
        db.close()
    return took, problem


def section(bench: Bench, dsn: str) -> None:
    s = bench.settings
    workers, jobs = 8, 2_000 if s.quick else 20_000
    for cost in per_step(bench, dsn, workers, jobs, 1 if s.quick else 2):
        per = "" if cost.ms_per_step is None else f", {cost.ms_per_step:.3f} ms per step"
        bench.say(f"durable: {cost.system}: {cost.jobs_per_s:,.0f} jobs/s{per} {cost.note}")
    count, seconds = (1_000, 10.0) if s.quick else (10_000, 60.0)
    took, problem = sleepers(bench, dsn, count, seconds)
    bench.say(
        f"durable: {count:,} jobs sleeping {seconds:g} s on 2 workers: {took:.1f} s {problem}"
    )
