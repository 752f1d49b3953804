"""The drain section: N preloaded no-op jobs drained by `jobq-supervise --workers W`, on any
of jobq's databases; the prefetch section runs its variants through the same drain."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..harness.app import Noop
from ..harness.context import REPO, Bench
from ..harness.cpu import Meter
from ..harness.jobqdb import DATABASE_NAMES, JobqDb, exited, supervise_cmd, wait_drained
from ..harness.memory import PeakMemory
from ..harness.results import Drain


@dataclass(frozen=True)
class Variant:
    """What sets one jobq drain apart: its name in the tables, the supervisor's log level and
    options, how its jobs are enqueued (None: preloaded copies of one Noop), and whether its
    workers trace (an SDK tracer provider that exports nothing: the cost of the spans alone)."""

    name: str = "default"
    log_level: str = "WARNING"
    options: Sequence[str] = ()
    load: Callable[[JobqDb], object] | None = None
    tracing: bool = False


DEFAULT = Variant()


def drain(bench: Bench, dsn: str, workers: int, jobs: int, variant: Variant = DEFAULT) -> Drain:
    """Preload `jobs` no-op jobs (or have the variant's `load` enqueue them), run
    `jobq-supervise --workers W` with its options until the table is drained, stop it with
    TERM (a drain with nothing in flight), and read the completion times."""
    db = JobqDb(dsn)
    database = DATABASE_NAMES[db.kind]
    given = " ".join(variant.options)
    settings = (
        f"jobq-supervise --workers {workers} --log-level {variant.log_level}"
        f"{' ' if given else ''}{given}, other options default"
    )
    result = Drain("jobq", variant.name, database, workers, jobs, settings=settings)
    try:
        db.reset()
        if variant.load is None:
            db.preload(Noop(), jobs)
        else:
            variant.load(db)
        db.settle()
        result.load = os.getloadavg()[0]
        proc = bench.procs.spawn(
            f"jobq-{database}-w{workers}",
            supervise_cmd(dsn, workers, *variant.options, log_level=variant.log_level),
            env={**bench.env(), **({"BENCH_TRACING": "1"} if variant.tracing else {})},
            cwd=REPO,
        )
        server = bench.pg.data if bench.pg is not None and db.kind == "postgresql" else None
        meter = Meter([proc.pid], server, master=proc.pid)
        with PeakMemory([proc.pid]) as memory:
            result.wall, result.note, result.window_jobs = wait_drained(
                db.unfinished, jobs, exited(bench, proc), meter
            )
        result.memory = memory.summary
        result.client_cpu, result.master_cpu, result.db_cpu = meter.results()
        code = bench.procs.stop(proc, signal.SIGTERM, grace=45.0)
        if code not in (0, -signal.SIGTERM) and not result.note:
            result.note = f"jobq-supervise exited with {code}"
        result.completed, result.after_first, result.span, others = db.completion()
        if others:
            result.note = (result.note + "; " if result.note else "") + ", ".join(
                f"{n} {status}" for status, n in sorted(others.items())
            )
    finally:
        db.close()
    return result
