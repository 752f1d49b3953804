"""The crash test of the prefetch section (bench/measures/prefetch.py): what a worker killed while
holding jobs costs in recovery delay, for jobq and for pgqueuer.

jobq: short sleeping jobs under `jobq-supervise --workers 2`; the child holding the most jobs
is killed with SIGKILL, and the delay runs from the kill to the last of its jobs completed
elsewhere, for the jobs released unstarted and for all of them. pgqueuer: a process killed once
it has picked jobs; they wait for its heartbeat timeout.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import psutil

from ..harness.app import Sleep
from ..harness.context import REPO, Bench
from ..harness.jobqdb import JobqDb, supervise_cmd
from ..harness.results import Recovery
from ..peers.peer import Peer

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


def jobq_recovery(
    bench: Bench, dsn: str, variant: str, options: Sequence[str], batched: bool
) -> Recovery:
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
            result.note = crash_round(bench, db, flags, batched, result)
            if result.note:
                break
    finally:
        db.close()
    return result


def crash_round(
    bench: Bench, db: JobqDb, flags: Sequence[str], batched: bool, result: Recovery
) -> str:
    """One kill, added to `result`; what went wrong, or ""."""
    db.reset()
    db.queue.enqueue_many([Sleep(CRASH_JOB_SECONDS) for _ in range(CRASH_JOBS)])
    db.settle()
    cmd = supervise_cmd(db.dsn, CRASH_WORKERS, *flags)
    proc = bench.procs.spawn(f"jobq-crash-{result.variant.replace(' ', '-')}", cmd, env=bench.env(),
                             cwd=REPO)  # fmt: skip
    try:
        # One at a time, the one job is all a child holds; a batch of two or more has one
        # started at most.
        least = 2 if batched else 1
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
        if done.last_released is not None and batched:
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
