"""A node's footprint (issue 60): what an idle `jobq-supervise --workers N` holds, by role
(the master, each helper, the workers), and what one worker holds per attempt in flight
under `--concurrency` as the attempts grow from 10 to 200.

Read from each process's /proc/<pid>/smaps_rollup (harness/memory.py), the medians over a
window of samples once the node is steady: all workers ready and idle, or every attempt
running. PSS summed over the tree is what the node occupies; a role's USS is what its
processes hold of their own, what restarting them would give back.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable

import psutil

from ..harness.app import AsyncHold
from ..harness.context import REPO, Bench
from ..harness.jobqdb import JobqDb, supervise_cmd
from ..harness.memory import MIB, processes_memory, summary
from ..harness.results import Footprint, InFlight, NodeFootprint, Role

IDLE_WORKERS = (2, 8)  # --workers of the idle nodes; the target is at 8
AT_ONCE = (10, 100, 200)  # attempts in flight in one worker, at --concurrency as many
HELPERS = ("fence keeper", "renewer", "housekeeper")
WINDOW = 3.0  # seconds of samples, once steady
EVERY = 0.25
READY_WITHIN = 60.0
HOLD = 600.0  # an attempt's wait: longer than any measurement
TARGET_WORKERS = 8
TARGET_IDLE_PSS = 120 * MIB  # an idle --workers 8, summed PSS (issue 60)


def role_of(title: str) -> str | None:
    """'master', a helper's name or 'workers', from a process title."""
    what = title.removeprefix("jobq-supervise: ")
    if what == title:
        return None
    if what in HELPERS:
        return what
    first = what.split()[0] if what else ""
    return {"master": "master", "worker": "workers"}.get(first)


def by_role(master: int) -> dict[str, list[int]]:
    """{role: pids} of the master and the processes right under it."""
    found: dict[str, list[int]] = {}
    with contextlib.suppress(psutil.Error):
        parent = psutil.Process(master)
        for process in [parent, *parent.children()]:
            with contextlib.suppress(psutil.Error):
                role = role_of(" ".join(filter(None, process.cmdline())))
                if role is not None:
                    found.setdefault(role, []).append(process.pid)
    return found


def steady(master: int, workers: int) -> bool:
    """Every helper up and every worker idle: nothing left to import or connect."""
    roles = by_role(master)
    idle = [p for p in roles.get("workers", []) if "idle" in title(p)]
    return all(h in roles for h in HELPERS) and len(idle) == workers


def title(pid: int) -> str:
    with contextlib.suppress(psutil.Error):
        return " ".join(filter(None, psutil.Process(pid).cmdline()))
    return ""


def wait(what: Callable[[], bool], within: float) -> bool:
    deadline = time.monotonic() + within
    while not what():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def sample_roles(master: int) -> dict[str, Footprint]:
    """Each role's processes, summed, now."""
    return {role: processes_memory(pids) for role, pids in by_role(master).items()}


def medians(master: int) -> tuple[dict[str, Footprint], int]:
    """Each role's median footprint over WINDOW, and the number of samples."""
    samples: dict[str, list[Footprint]] = {}
    taken = 0
    deadline = time.monotonic() + WINDOW
    while time.monotonic() < deadline:
        for role, found in sample_roles(master).items():
            samples.setdefault(role, []).append(found)
        taken += 1
        time.sleep(EVERY)
    middle = {}
    for role, footprints in samples.items():
        if (s := summary(footprints)) is not None:
            middle[role] = s.median
    return middle, taken


def idle_node(bench: Bench, dsn: str, workers: int) -> NodeFootprint:
    """An idle node of `workers`, on an empty queue."""
    db = JobqDb(dsn)
    try:
        db.reset()
        proc = bench.procs.spawn(
            f"jobq-idle-w{workers}", supervise_cmd(dsn, workers), env=bench.env(), cwd=REPO
        )
        try:
            note = "" if wait(lambda: steady(proc.pid, workers), READY_WITHIN) else "not steady"
            roles, taken = medians(proc.pid)
        finally:
            bench.procs.stop(proc, signal.SIGTERM, grace=30.0)
    finally:
        db.close()
    order = ["master", *HELPERS, "workers"]
    found = [Role(r, roles[r]) for r in order if r in roles]
    return NodeFootprint(workers, found, taken, note)


def running(db: JobqDb) -> int:
    return int(db.scalar("SELECT count(*) FROM jobq_jobs WHERE status = 'in_progress'"))


def in_flight(bench: Bench, dsn: str, at_once: int) -> InFlight:
    """One worker at --concurrency `at_once`: read idle, then with `at_once` attempts held."""
    db = JobqDb(dsn)
    try:
        db.reset()
        proc = bench.procs.spawn(
            f"jobq-inflight-{at_once}",
            supervise_cmd(dsn, 1, "--concurrency", str(at_once)),
            env=bench.env(),
            cwd=REPO,
        )
        try:
            note = "" if wait(lambda: steady(proc.pid, 1), READY_WITHIN) else "not steady"
            idle = medians(proc.pid)[0].get("workers", Footprint(0, 0, 0, 0))
            db.preload(AsyncHold(HOLD), at_once)
            if not wait(lambda: running(db) >= at_once, READY_WITHIN):
                note = f"only {running(db)} of {at_once} running"
            busy = medians(proc.pid)[0].get("workers", Footprint(0, 0, 0, 0))
            held = running(db)
        finally:
            # QUIT: the held attempts are the bench's own, nothing to drain.
            bench.procs.stop(proc, signal.SIGQUIT, grace=30.0)
    finally:
        db.close()
    return InFlight(at_once, held, idle, busy, note)


def mib(value: float) -> str:
    return f"{value / MIB:,.1f}"


def node_table(nodes: list[NodeFootprint]) -> list[str]:
    lines = [
        "| --workers | role | processes | RSS MiB | PSS MiB | USS MiB |",
        "|---|---|---|---|---|---|",
    ]
    for node in nodes:
        for r in [*node.roles, Role("**all**", node.total)]:
            m = r.memory
            lines.append(
                f"| {node.workers} | {r.role} | {m.processes} | {mib(m.rss)} | {mib(m.pss)} "
                f"| {mib(m.uss)} |"
            )
    return lines


def in_flight_table(found: list[InFlight]) -> list[str]:
    """One row per N; 'since the last N': the growth from the row above over the attempts
    added, which is flat when each attempt costs the same however many run."""
    lines = [
        "| attempts in flight | running | worker USS MiB idle | with them | per attempt KiB "
        "| since the last N, KiB per attempt | worker PSS MiB idle | with them | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    previous: InFlight | None = None
    for f in found:
        since = "-"
        if previous is not None and f.running > previous.running:
            grown = (f.busy.uss - previous.busy.uss) / (f.running - previous.running)
            since = f"{grown / 1024:,.1f}"
        lines.append(
            f"| {f.at_once} | {f.running} | {mib(f.idle.uss)} | {mib(f.busy.uss)} "
            f"| {f.per_attempt_uss / 1024:,.1f} | {since} | {mib(f.idle.pss)} "
            f"| {mib(f.busy.pss)} | {f.note} |"
        )
        previous = f
    return lines


def target(nodes: list[NodeFootprint]) -> list[str]:
    node = next((n for n in nodes if n.workers == TARGET_WORKERS), None)
    if node is None:
        return []
    pss = node.total.pss
    verdict = "met" if pss < TARGET_IDLE_PSS and not node.note else "MISSED"
    return [
        f"- an idle node of --workers {TARGET_WORKERS}: summed PSS under "
        f"{TARGET_IDLE_PSS / MIB:.0f} MiB: {mib(pss)} MiB: **{verdict}**"
    ]


def markdown(nodes: list[NodeFootprint], found: list[InFlight]) -> list[str]:
    """The section of RESULTS.md; empty when the section did not run."""
    if not nodes and not found:
        return []
    return [
        "## A node's footprint (issue 60)",
        "",
        "Idle nodes: `jobq-supervise --workers N --app bench.harness.app` on an empty queue "
        "on PostgreSQL, read once every helper is up and every worker idle; each role's "
        f"processes summed, the median of {WINDOW:g} s of samples from smaps_rollup.",
        "",
        *node_table(nodes),
        "",
        "A worker's attempts in flight: `jobq-supervise --workers 1 --concurrency N`, read "
        "idle, then with N coroutine jobs each awaiting a long sleep, all running. Per "
        "attempt: the worker's USS with them less without, over N.",
        "",
        *in_flight_table(found),
        "",
        *target(nodes),
        "",
    ]
