"""The run, section by section: the servers and peers it needs, then each measurement in
turn, every failure a note in RESULTS.md rather than the end of the run."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

from .harness.context import REPO, Bench
from .harness.jobqdb import JobqDb
from .harness.results import Drain
from .harness.servers import MariadbServer, PostgresServer
from .measures import (
    drain,
    durable,
    floor,
    footprint,
    horizon,
    iobound,
    key_limits,
    latency,
    limit,
    pools,
    prefetch,
    profiling,
    renewal,
    scale,
)
from .peers.peer import Peer, installed
from .peers.pgq import Pgqueuer
from .peers.proc import Procrastinate
from .report import tables

T = TypeVar("T")

TREE = Path(__file__).resolve().parent.parent  # the work tree `python -m bench` runs in

PEERS: tuple[type[Peer], ...] = (Pgqueuer, Procrastinate)

# The W a worker is profiled at, when the run drains at it (else the largest).
PROFILE_WORKERS = 8


def attempt(bench: Bench, what: str, action: Callable[[], T]) -> T | None:
    """Run one measurement; a failure becomes a note in RESULTS.md, not the end of the run."""
    try:
        return action()
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as error:
        bench.note(f"{what} failed: {type(error).__name__}: {error}")
        traceback.print_exc()
        return None


def show(bench: Bench, d: Drain | None) -> None:
    if d is not None:
        bench.drains.append(d)
        extra = f" [{d.note}]" if d.note else ""
        bench.say(
            f"{d.system} {d.variant} on {d.database}, W={d.workers}: {d.rate:,.0f} jobs/s "
            f"({d.completed:,}/{d.jobs:,} in {d.span:.2f} s, wall {d.wall:.1f} s){extra}"
        )


def measure(bench: Bench, what: str, action: Callable[[], Drain]) -> None:
    measured(bench, what, action)


def measured(bench: Bench, what: str, action: Callable[[], Drain]) -> Drain | None:
    found = attempt(bench, what, action)
    show(bench, found)
    return found


def load_every_backend() -> None:
    """Import all of jobq now: a backend imported lazily half an hour later must come from
    the same code as the rest (it is frozen anyway; this also fails fast if one is broken)."""
    import jobq.backends.mysql
    import jobq.backends.postgresql
    import jobq.backends.sqlite  # noqa: F401


def versions(bench: Bench) -> None:
    v = bench.versions
    v["python"] = sys.version.split()[0]
    for package in ("jobq", "psycopg", "PyMySQL", "pgqueuer", "procrastinate", "asyncpg",
                    "psutil", "matplotlib"):  # fmt: skip
        v[package] = installed(package) or "not installed"
    v["sqlite"] = sqlite3.sqlite_version
    # The work tree may hold uncommitted changes to jobq: name the exact source measured,
    # the copy frozen at the start of the run (see harness/snapshot.py).
    digest = hashlib.sha256()
    for path in sorted((REPO / "jobq").rglob("*.py")):
        digest.update(path.read_bytes())
    v["jobq source measured (sha256 of jobq/**/*.py, frozen at start)"] = digest.hexdigest()[:16]
    v["pgbench"] = limit.pgbench_version()
    try:
        out = subprocess.run(["git", "-C", str(TREE), "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=10, check=False)  # fmt: skip
        if bench.settings.jobq_at is not None:
            v["jobq"] += f" (git {bench.settings.jobq_at}, by --jobq-at)"
        elif out.stdout.strip():
            v["jobq"] += f" (git {out.stdout.strip()})"
    except (OSError, subprocess.TimeoutExpired):
        pass


def setup_peer(bench: Bench, cls: type[Peer]) -> Peer | None:
    assert bench.pg is not None
    if installed(cls.package) is None:
        bench.note(f"{cls.package} is not installed (pip install .[bench]): not measured")
        return None
    dsn = bench.pg.create_database(f"bench_{cls.name}")
    peer = cls(bench, dsn)
    try:
        peer.install()
    except Exception:
        peer.close()
        raise
    return peer


def sweep(bench: Bench, peer: Peer) -> int:
    """Pick the peer's best setting on this load: a short drain with each candidate at one
    worker count (4, or the nearest measured), recorded in the notes."""
    s = bench.settings
    w = min(s.workers, key=lambda x: abs(x - 4))
    jobs = max(1000, s.jobs // 5)
    rates: dict[int, float] = {}
    for setting in peer.candidates():
        d = peer.drain(w, jobs, setting, "sweep")
        rates[setting] = d.rate if d.completed == jobs else 0.0
    best = max(rates, key=lambda k: rates[k])
    bench.note(
        f"{peer.name} sweep at W={w}, {jobs:,} jobs: "
        + ", ".join(f"{peer.describe(k)}: {r:,.0f} jobs/s" for k, r in rates.items())
        + f"; best: {peer.describe(best)}"
    )
    return best


def wanted_peers(sections: set[str]) -> tuple[type[Peer], ...]:
    """The peers to set up: all for their own sections, pgqueuer alone for prefetch's."""
    if sections & {"peers", "latency", "iobound"}:
        return PEERS
    return (Pgqueuer,) if sections & {"prefetch", "horizon"} else ()


def run(bench: Bench) -> None:
    s = bench.settings
    load_every_backend()
    versions(bench)
    dsn = start_postgres(bench)
    peers = start_peers(bench)
    try:
        throughput(bench, dsn, peers)
        if "prefetch" in s.sections:
            prefetched(bench, dsn, peers)
        if "iobound" in s.sections:
            found = iobound.section(bench, dsn, [p for p, _ in peers], partial(attempt, bench))
            bench.io_drains = found
        if "latency" in s.sections:
            latencies(bench, dsn, peers)
        if "pools" in s.sections:
            pooled(bench, dsn)
        if "horizon" in s.sections:
            held(bench, dsn, peers)
    finally:
        for peer, _ in peers:
            peer.close()
    without_peers(bench, dsn)


def without_peers(bench: Bench, dsn: str) -> None:
    """The sections that measure jobq alone, once the peers are closed."""
    s = bench.settings
    if "limits" in s.sections:
        workers = min(s.workers, key=lambda w: abs(w - key_limits.WORKERS))
        key_limits.section(bench, dsn, workers, partial(measured, bench))
    if "renewal" in s.sections:
        renewal_cost(bench, dsn)
    if "profile" in s.sections:
        profiles(bench, dsn)
    if "other-dbs" in s.sections:
        other_databases(bench)
    if "scale" in s.sections:
        at_scale(bench, dsn)
    if "footprint" in s.sections:
        footprints(bench, dsn)
    if "durable" in s.sections:
        attempt(bench, "durable jobs", lambda: durable.section(bench, dsn))


def start_postgres(bench: Bench) -> str:
    """The run's PostgreSQL, started; returns the DSN of jobq's database on it."""
    pg = bench.pg = PostgresServer()
    bench.say(f"starting PostgreSQL on 127.0.0.1:{pg.port}")
    pg.start()
    bench.server_settings["PostgreSQL"] = pg_settings = pg.settings()
    bench.versions["postgresql"] = pg_settings["server_version"]
    return pg.create_database("bench_jobq")


def start_peers(bench: Bench) -> list[tuple[Peer, int]]:
    """Each peer the sections want, installed in a database of its own, with the setting
    its sweep found best (or its default, where no section compares settings)."""
    s = bench.settings
    peers: list[tuple[Peer, int]] = []
    for cls in wanted_peers(s.sections):
        peer = attempt(bench, f"setting up {cls.name}", partial(setup_peer, bench, cls))
        if peer is None:
            continue
        best = peer.default_setting()
        if "peers" in s.sections or ("prefetch" in s.sections and cls is Pgqueuer):
            best = attempt(bench, f"{peer.name} sweep", partial(sweep, bench, peer)) or best
        peers.append((peer, best))
    return peers


def throughput(bench: Bench, dsn: str, peers: list[tuple[Peer, int]]) -> None:
    """Steps 1 to 3: jobq, the SQL limit and the peers at each worker count.

    One W at a time, every system back to back: the machine's background load drifts, and
    ratios are fairest between runs minutes, not a quarter of an hour, apart.
    """
    s = bench.settings
    for w in s.workers:
        if "drain" in s.sections:
            measure(bench, f"jobq W={w}", partial(drain.drain, bench, dsn, w, s.jobs))
            if w == s.info_logs_at:
                info = partial(
                    drain.drain, bench, dsn, w, s.jobs, drain.Variant("INFO logs", log_level="INFO")
                )
                measure(bench, f"jobq INFO W={w}", info)
                # Tracing off is the default drain (the API installed, no provider set): its
                # cost against an earlier jobq is a --jobq-at run's. This is tracing on.
                traced = drain.Variant("traced, nothing exported", tracing=True)
                measure(
                    bench, f"jobq traced W={w}", partial(drain.drain, bench, dsn, w, s.jobs, traced)
                )
        if "limit" in s.sections:
            measure(bench, f"pgbench c={w}", partial(limit.drain, bench, dsn, w, s.jobs))
            two = partial(limit.drain, bench, dsn, w, s.jobs, limit.TWO_STATEMENTS)
            measure(bench, f"pgbench two statements c={w}", two)
            measure(bench, f"psycopg floor W={w}", partial(floor.drain, bench, dsn, w, s.jobs))
        if "peers" in s.sections:
            for peer, best in peers:
                default = peer.default_setting()
                measure(
                    bench, f"{peer.name} W={w}", partial(peer.drain, w, s.jobs, default, "default")
                )
                if best != default:
                    measure(
                        bench,
                        f"{peer.name} best W={w}",
                        partial(peer.drain, w, s.jobs, best, "best"),
                    )
                single = peer.one_at_a_time()
                if single is not None:
                    one = partial(peer.drain, w, s.jobs, single, "one at a time")
                    measure(bench, f"{peer.name} one at a time W={w}", one)


def prefetched(bench: Bench, dsn: str, peers: list[tuple[Peer, int]]) -> None:
    """The prefetch section (bench/measures/prefetch.py): its drains, then the crash tests."""
    pgq = next(((p, best) for p, best in peers if isinstance(p, Pgqueuer)), None)
    section = partial(prefetch.section, bench, dsn, pgq, partial(measure, bench))
    for what, test in attempt(bench, "prefetch drains", section) or []:
        r = attempt(bench, what, test)
        if r is not None:
            bench.recoveries.append(r)
            delays, unstarted = (", ".join(f"{d:.2f} s" for d in ds) or "none"
                                 for ds in (r.delays, r.released_delays))  # fmt: skip
            bench.say(
                f"{what}: held {r.held}; delay of all {delays}, of the unstarted {unstarted}; "
                f"{r.extra_attempts} extra attempt(s) {r.note}"
            )


def latencies(bench: Bench, dsn: str, peers: list[tuple[Peer, int]]) -> None:
    """Step 4."""
    found = [attempt(bench, "jobq latency", partial(latency.jobq_latency, bench, dsn))]
    for peer, _ in peers:
        found.append(
            attempt(bench, f"{peer.name} latency", partial(latency.peer_latency, bench, peer))
        )
    for lat in found:
        if lat is not None:
            bench.latencies.append(lat)
            p50, p99 = (tables.ms(latency.percentile(lat.samples, q)) for q in (50, 99))
            bench.say(f"latency {lat.system}: p50 {p50}, p99 {p99} {lat.note}")


def held(bench: Bench, dsn: str, peers: list[tuple[Peer, int]]) -> None:
    """Drains behind a held snapshot, jobq's and pgqueuer's in turn (measures/horizon.py)."""
    s = bench.settings
    pgq = next((p for p, _ in peers if isinstance(p, Pgqueuer)), None)
    rounds = partial(
        horizon.section, bench, dsn, pgq, s.horizon_workers, s.horizon_jobs, s.horizon_rounds,
        partial(attempt, bench), s.horizon_backlog, s.horizon_finished,
    )  # fmt: skip
    bench.held_rounds = attempt(bench, "held snapshot rounds", rounds) or []


def pooled(bench: Bench, dsn: str) -> None:
    """Pickup latency beside a backlog of long jobs, in one pool and in a pool each."""
    for name, sizing in pools.layouts(bench.settings.latency_workers):
        run = partial(pools.starved, bench, dsn, name, sizing)
        lat = attempt(bench, f"jobq latency, {name}", run)
        if lat is not None:
            bench.pool_latencies.append(lat)
            p50, p99 = (tables.ms(latency.percentile(lat.samples, q)) for q in (50, 99))
            bench.say(f"latency {lat.system}: p50 {p50}, p99 {p99} {lat.note}")


def renewal_cost(bench: Bench, dsn: str) -> None:
    """Step 5."""
    bench.renewals = attempt(bench, "renewal rounds", partial(renewal.rounds, bench, dsn)) or []
    bench.master = attempt(bench, "master load", partial(renewal.master_load, bench, dsn))
    if bench.master:
        m = bench.master
        bench.say(
            f"master: {m.master_cpu_share:.2%} of a core, {m.master_rss_mb:.1f} MB RSS; "
            f"{m.renew_statements} renewal statements in {m.window:.1f} s"
        )


def profiles(bench: Bench, dsn: str) -> None:
    s = bench.settings
    w = PROFILE_WORKERS if PROFILE_WORKERS in s.workers else max(s.workers)
    kinds = (("Python CPU (py-spy --gil)", False), ("wall time (py-spy --idle)", True))
    for kind, idle in kinds:
        p = attempt(
            bench,
            f"profile {kind}",
            partial(profiling.profile, bench, dsn, w, 10.0, idle, s.profile_prefetch),
        )
        if p is not None:
            bench.profile_results[kind] = p
            bench.say(f"profile {kind}: {p.samples} worker samples {p.note}")


def mariadb(bench: Bench) -> str | None:
    """A database on the run's MariaDB, started on first use; None if it would not start."""
    if bench.mariadb is None:
        maria = bench.mariadb = MariadbServer(bench.procs)
        bench.say(f"starting MariaDB on 127.0.0.1:{maria.port}")

        def start() -> bool:
            maria.start()
            return True

        if not attempt(bench, "starting MariaDB", start):
            return None
        bench.server_settings["MariaDB"] = found = maria.settings()
        bench.versions["mariadb"] = found["version"]
    if bench.mariadb.proc is None:
        return None
    return bench.mariadb.create_database(f"bench_jobq_{len(bench.drains)}")


def sqlite_dsn(bench: Bench) -> str:
    """A fresh SQLite file in the run's SQLite directory."""
    if bench.sqlite_dir is None:
        bench.sqlite_dir = Path(tempfile.mkdtemp(prefix="jobq-bench-sqlite-"))
    path = Path(tempfile.mkstemp(suffix=".sqlite3", dir=bench.sqlite_dir)[1])
    path.unlink()
    return f"sqlite:///{path}"


def other_databases(bench: Bench) -> None:
    """Step 6: the same drain, jobq only, on MariaDB and on an SQLite file."""
    s = bench.settings
    mdsn = mariadb(bench)
    if mdsn is not None:
        for w in s.mariadb_workers:
            measure(
                bench, f"jobq mariadb W={w}", partial(drain.drain, bench, mdsn, w, s.other_jobs)
            )
    sdsn = sqlite_dsn(bench)
    db = JobqDb(sdsn)
    bench.server_settings["SQLite"] = {
        "journal_mode": str(db.scalar("PRAGMA journal_mode")),
        "synchronous": str(db.scalar("PRAGMA synchronous")),
        "file": "a temp dir on the local disk",
    }
    db.close()
    for w in s.sqlite_workers:
        measure(bench, f"jobq sqlite W={w}", partial(drain.drain, bench, sdsn, w, s.other_jobs))


def at_scale(bench: Bench, dsn: str) -> None:
    """Step 7: drains behind big backlogs and bulk enqueue, on each database."""
    s = bench.settings
    for database, target in (
        ("postgresql", dsn),
        ("mariadb", mariadb(bench)),
        ("sqlite", sqlite_dsn(bench)),
    ):
        if target is None:
            continue
        large = s.scale_large if database == "postgresql" else s.scale_other_large
        sizes = scale.Sizes(s.scale_small, large, s.scale_measured, s.scale_workers)
        for scenario in scale.SCENARIOS:
            what = f"scale {database}: {scenario.name}"
            d = attempt(bench, what, partial(scale.drain, bench, target, scenario, sizes))
            if d is not None:
                bench.scale_drains.append(d)
                bench.say(f"{what}: {d.rate:,.0f} jobs/s ({d.settings}) {d.note}")
        rates = attempt(
            bench,
            f"enqueue rates {database}",
            partial(scale.enqueue_rates, target, s.scale_enqueue_jobs),
        )
        for r in rates or []:
            bench.enqueue_rates.append(r)
            bench.say(f"{database} {r.method}: {r.rate:,.0f} jobs/s ({r.jobs:,} jobs)")


def footprints(bench: Bench, dsn: str) -> None:
    """Idle nodes by role, then one worker's memory per attempt in flight."""
    for w in footprint.IDLE_WORKERS:
        node = attempt(bench, f"idle node W={w}", partial(footprint.idle_node, bench, dsn, w))
        if node is not None:
            bench.idle_nodes.append(node)
            t = node.total
            bench.say(
                f"idle node W={w}: PSS {footprint.mib(t.pss)} MiB, USS {footprint.mib(t.uss)} "
                f"MiB over {t.processes} processes {node.note}"
            )
    for n in footprint.AT_ONCE:
        found = attempt(bench, f"{n} in flight", partial(footprint.in_flight, bench, dsn, n))
        if found is not None:
            bench.in_flight.append(found)
            per = found.per_attempt_uss / 1024
            bench.say(f"{n} in flight: {per:.1f} KiB USS per attempt {found.note}")
