"""A bench run's settings and shared state: servers, child processes, temp dir, results."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .procs import Processes
from .results import (
    Drain,
    EnqueueRate,
    HeldRounds,
    InFlight,
    Latency,
    MasterLoad,
    NodeFootprint,
    Profile,
    Recovery,
    RenewalRound,
)
from .servers import MariadbServer, PostgresServer

# Where children run and import jobq and bench.harness.app from: the run's frozen copy of the work
# tree's code (see snapshot.py), or the work tree itself.
REPO = Path(os.environ.get("BENCH_CODE") or Path(__file__).resolve().parents[2])

SECTIONS = (
    "drain", "limit", "peers", "prefetch", "iobound", "latency", "limits", "pools", "renewal",
    "other-dbs",
    "profile", "scale", "footprint", "horizon", "durable",
)  # fmt: skip


@dataclass
class Settings:
    jobs: int
    workers: list[int]
    other_jobs: int  # MariaDB and SQLite drains
    mariadb_workers: list[int]
    sqlite_workers: list[int]
    latency_rate: float
    latency_seconds: float
    latency_workers: int
    master_jobs: int  # long jobs, one per child, while the master's load is sampled
    master_job_seconds: float
    master_window: float
    sections: set[str]
    out: Path
    quick: bool
    info_logs_at: int | None  # also drain with jobq's default INFO logging at this W
    # The scale section (bench/measures/scale.py): backlogs on PostgreSQL, then MariaDB and SQLite.
    scale_small: int = 10_000
    scale_large: int = 1_000_000
    scale_other_large: int = 100_000
    scale_measured: int = 10_000
    scale_workers: int = 8
    scale_enqueue_jobs: int = 100_000
    # The prefetch section (bench/measures/prefetch.py): jobs per drain, and kills per
    # recovery test.
    prefetch_jobs: int = 20_000
    prefetch_kills: int = 3
    io_jobs: int = 10_000  # jobs per drain of the I/O section (bench/measures/iobound.py)
    # The held-snapshot section (bench/measures/horizon.py): jobs per round, held rounds,
    # and workers (processes, for pgqueuer).
    horizon_jobs: int = 20_000
    horizon_rounds: int = 10
    horizon_workers: int = 8
    # Its other scenarios: a pending backlog of another type, and finished jobs run first
    # (0: left out).
    horizon_backlog: int = 0
    horizon_finished: int = 0
    jobq_at: str | None = None  # the commit whose jobq/ is measured, if not the work tree's
    profile_prefetch: int | None = None  # the profiled workers' --prefetch, if not the default


def drain_timeout(jobs: int) -> float:
    # Generous: 60 s plus 10 ms a job (a 100 jobs/s floor). A drain slower than that is
    # broken, not slow, and the run goes on with a note instead of hanging.
    return 60.0 + jobs / 100.0


@dataclass
class Bench:
    settings: Settings
    tmp: Path
    procs: Processes
    pg: PostgresServer | None = None
    mariadb: MariadbServer | None = None
    sqlite_dir: Path | None = None
    drains: list[Drain] = field(default_factory=list)
    latencies: list[Latency] = field(default_factory=list)
    pool_latencies: list[Latency] = field(default_factory=list)  # beside a long backlog
    renewals: list[RenewalRound] = field(default_factory=list)
    master: MasterLoad | None = None
    profile_results: dict[str, Profile] = field(default_factory=dict)
    scale_drains: list[Drain] = field(default_factory=list)
    enqueue_rates: list[EnqueueRate] = field(default_factory=list)
    recoveries: list[Recovery] = field(default_factory=list)
    io_drains: list[Drain] = field(default_factory=list)
    idle_nodes: list[NodeFootprint] = field(default_factory=list)
    in_flight: list[InFlight] = field(default_factory=list)
    held_rounds: list[HeldRounds] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    server_settings: dict[str, dict[str, str]] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of every child: the bench package importable, and no buffering
        so that a log read after a failure is complete."""
        env = dict(os.environ)
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(REPO) + (os.pathsep + path if path else "")
        env["PYTHONUNBUFFERED"] = "1"
        env.update(extra)
        return env

    def say(self, message: str) -> None:
        elapsed = time.monotonic() - self.started
        print(f"[{elapsed:7.1f}s] {message}", flush=True)

    def note(self, message: str) -> None:
        self.notes.append(message)
        self.say(f"NOTE: {message}")


PYTHON = sys.executable
