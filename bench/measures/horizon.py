"""Behind a held snapshot: drains while a REPEATABLE READ transaction holds back vacuum.

A baseline drain, then rounds of the same number of jobs, each enqueued and drained while
one transaction on the system's database keeps the snapshot it took before the first round.
Nothing between rounds removes the rows and index entries the jobs leave (the table is
never truncated: that would drop them whatever the snapshot), so each round runs behind
every job the rounds before it ran. jobq and pgqueuer (at its best setting) take turns,
round by round, each in its own database with its own holder: PostgreSQL keeps rows for
the snapshots of sessions in the same database only. Each rate is read from the system's
own completion times of that round's jobs, as every drain's is (results.Drain).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import psycopg

from ..harness.app import Noop
from ..harness.context import REPO, Bench
from ..harness.jobqdb import JobqDb, exited, supervise_cmd, wait_drained
from ..harness.results import HeldRounds
from ..peers.pgq import Pgqueuer

# pgqueuer's best setting in the runs: several processes, 200 jobs a dequeue.
PGQ_BATCH = 200
# The backlog's type (pgqueuer's entrypoint), which no worker of either system serves.
OTHER = "other"

# A round's rate, from completion times after the round's mark: (count after the first
# completion, first-to-last span in seconds). {done} selects `at` and is filtered by {after}.
ROUND_RATE = (
    "SELECT count(*) FILTER (WHERE at > first), extract(epoch FROM max(at) - min(first)) "
    "FROM (SELECT at, min(at) OVER () AS first FROM ({done}) AS d) AS r"
)


@contextmanager
def held_snapshot(dsn: str) -> Iterator[None]:
    """A session of the database that holds a REPEATABLE READ snapshot (a report's, a
    dump's) until the block ends. It reads no jobs table, so it locks none."""
    with psycopg.connect(dsn, autocommit=True) as holder:
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT 1")
        try:
            yield
        finally:
            holder.execute("ROLLBACK")


def rate(connection: Any, done: str, params: dict[str, Any]) -> float:
    row = connection.execute(ROUND_RATE.format(done=done), params).fetchone()
    after, span = int(row[0] or 0), float(row[1] or 0.0)
    return after / span if span > 0 else 0.0


class JobqRounds:
    """jobq's drains: `jobq-supervise --workers W --type noop` until the round's jobs are
    done, beside a backlog of another type that it never runs."""

    def __init__(self, bench: Bench, dsn: str, workers: int, jobs: int, backlog: int) -> None:
        self.bench, self.dsn, self.workers, self.jobs = bench, dsn, workers, jobs
        self.backlog = backlog
        self.db = JobqDb(dsn)
        self.db.reset()
        if backlog:
            self.db.burst(backlog, OTHER, None)
        settings = f"jobq-supervise --workers {workers} --type {Noop.type}, defaults"
        self.result = HeldRounds("jobq", settings)

    def round(self, jobs: int | None = None) -> float:
        db, count = self.db, jobs or self.jobs
        mark = int(db.scalar("SELECT coalesce(max(id), 0) FROM jobq_jobs"))
        db.preload(Noop(), count)
        db.settle()
        proc = self.bench.procs.spawn(
            f"jobq-horizon-w{self.workers}",
            supervise_cmd(self.dsn, self.workers, "--type", Noop.type),
            env=self.bench.env(),
            cwd=REPO,
        )
        left = lambda: db.unfinished() - self.backlog  # noqa: E731 - read at each poll
        _, note, _ = wait_drained(left, count, exited(self.bench, proc))
        self.bench.procs.stop(proc, signal.SIGTERM, grace=45.0)
        self.result.note = self.result.note or note
        done = "SELECT finished_at AS at FROM jobq_jobs WHERE status = 'completed' AND id > %(m)s"
        return rate(db.queue.backend.connection, done, {"m": mark})

    def close(self) -> None:
        self.db.close()


class PgqRounds:
    """pgqueuer's drains: W worker processes in drain mode, batch PGQ_BATCH."""

    def __init__(self, bench: Bench, peer: Pgqueuer, workers: int, jobs: int, backlog: int) -> None:
        self.bench, self.peer, self.workers, self.jobs = bench, peer, workers, jobs
        self.backlog = backlog
        self.dsn = peer.dsn
        peer.reset()
        asyncio.run(peer.preload(backlog, OTHER))  # an entrypoint its workers do not serve
        self.result = HeldRounds("pgqueuer", f"{workers} processes, {peer.describe(PGQ_BATCH)}")

    def round(self, jobs: int | None = None) -> float:
        peer, count = self.peer, jobs or self.jobs
        mark = peer.scalar("SELECT coalesce(max(id), 0) FROM pgqueuer_log")
        asyncio.run(peer.preload(count, "noop"))
        peer.settle()
        procs = []
        for i in range(self.workers):
            cmd, extra = peer.worker_cmd(PGQ_BATCH, drain=True)
            procs.append(
                self.bench.procs.spawn(
                    f"pgqueuer-horizon-{i}", cmd, env=self.bench.env(**extra), cwd=REPO
                )
            )

        def gone() -> str:
            ended = all(p.poll() is not None for p in procs)
            return "workers exited with jobs left" if ended else ""

        left = lambda: peer.remaining() - self.backlog  # noqa: E731 - read at each poll
        _, note, _ = wait_drained(left, count, gone)
        self.bench.procs.wait_all(procs, 30.0)
        for proc in procs:
            self.bench.procs.stop(proc, signal.SIGTERM, grace=10.0)
        self.result.note = self.result.note or note
        done = (
            "SELECT created AS at FROM pgqueuer_log WHERE status = 'successful' AND id > %(mark)s"
        )
        return rate(peer.conn, done, {"mark": mark})

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class Scenario:
    """What the table holds besides each round's jobs: `backlog` pending jobs of a type no
    worker runs, and `finished` jobs run to completion before the baseline (each system's own
    record of them: jobq's completed rows, pgqueuer's log)."""

    name: str
    backlog: int = 0
    finished: int = 0


def scenarios(backlog: int, finished: int) -> list[Scenario]:
    """The plain rounds, then one with the backlog and one with the finished jobs, if asked."""
    found = [Scenario("plain")]
    if backlog:
        found.append(Scenario(f"beside {backlog:,} pending jobs of another type", backlog=backlog))
    if finished:
        found.append(Scenario(f"after {finished:,} finished jobs", finished=finished))
    return found


def section(
    bench: Bench,
    dsn: str,
    pgq: Pgqueuer | None,
    workers: int,
    jobs: int,
    rounds: int,
    attempt: Callable[[str, Callable[[], float]], float | None],
    backlog: int = 0,
    finished: int = 0,
) -> list[HeldRounds]:
    """Each scenario's baselines, then its `rounds` held rounds, the systems taking turns."""
    found = []
    for scenario in scenarios(backlog, finished):
        for held in held_rounds(bench, dsn, pgq, workers, jobs, rounds, attempt, scenario):
            held.scenario = scenario.name
            found.append(held)
    return found


def held_rounds(
    bench: Bench,
    dsn: str,
    pgq: Pgqueuer | None,
    workers: int,
    jobs: int,
    rounds: int,
    attempt: Callable[[str, Callable[[], float]], float | None],
    scenario: Scenario,
) -> list[HeldRounds]:
    """One scenario: the baselines, then `rounds` held rounds, the systems taking turns."""
    systems: list[JobqRounds | PgqRounds] = [
        JobqRounds(bench, dsn, workers, jobs, scenario.backlog)
    ]
    if pgq is not None:
        systems.append(PgqRounds(bench, pgq, workers, jobs, scenario.backlog))
    try:
        for system in systems:
            if scenario.finished:
                bench.say(f"{system.result.system}: running {scenario.finished:,} jobs first")
                attempt(f"{system.result.system} warm-up", partial(system.round, scenario.finished))
        for system in systems:
            held = system.result
            held.baseline = attempt(f"{held.system} baseline", system.round) or 0.0
            bench.say(f"held snapshot, {held.system} baseline: {held.baseline:,.0f} jobs/s")
        with held_snapshot(systems[0].dsn), held_snapshot(systems[-1].dsn):
            for number in range(1, rounds + 1):
                for system in systems:
                    found = attempt(f"{system.result.system} held round {number}", system.round)
                    system.result.rounds.append(found or 0.0)
                    bench.say(
                        f"held snapshot, {system.result.system} round {number}: "
                        f"{found or 0:,.0f} jobs/s"
                    )
    finally:
        for system in systems:
            system.close()
    return [system.result for system in systems]


def markdown(found: list[HeldRounds], jobs: int, workers: int) -> list[str]:
    if not found:
        return []
    count = max(len(f.rounds) for f in found)
    head = [
        "scenario",
        "system",
        "baseline",
        *(f"held {i}" for i in range(1, count + 1)),
        "last / baseline",
    ]
    lines = [
        "## Behind a held snapshot",
        "",
        f"A baseline drain of {jobs:,} no-op jobs, then rounds of {jobs:,} more, each enqueued "
        f"and drained while a REPEATABLE READ transaction on the system's database holds the "
        f"snapshot it took before the first round ({workers} workers; the systems take turns, "
        "round by round; jobs/s from each round's own completion times). Scenarios besides "
        "the plain one: a pending backlog of a type no worker runs, and a table that already "
        "holds many finished jobs (run to completion before the baseline). See "
        "bench/measures/horizon.py.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for f in found:
        ratio = f.ratio()
        cells = [
            f.scenario,
            f.system,
            f"{f.baseline:,.0f}",
            *(f"{r:,.0f}" for r in f.rounds),
            "" if ratio is None else f"{ratio:.2f}x",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"- {f.system}: {f.settings}{'; ' + f.note if f.note else ''}" for f in found]
    lines.append("")
    return lines
