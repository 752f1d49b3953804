"""What the bench measures, as plain records the report turns into tables and a plot."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Footprint:
    """Memory of every process of a system at one moment: the sums over them, in bytes
    (see harness/memory.py)."""

    processes: int
    rss: int
    pss: int
    uss: int


@dataclass(frozen=True)
class Memory:
    """A system's memory over a run: each sum's largest and median over the samples."""

    peak: Footprint
    median: Footprint
    samples: int


@dataclass(frozen=True)
class Role:
    """The processes of one role in a supervisor's tree (the master, a helper, the workers),
    the median of their summed memory over a window."""

    role: str
    memory: Footprint


@dataclass
class NodeFootprint:
    """An idle `jobq-supervise --workers N`, every process of it read by role."""

    workers: int
    roles: list[Role]
    samples: int
    note: str = ""

    @property
    def total(self) -> Footprint:
        return Footprint(*(sum(getattr(r.memory, f) for r in self.roles)
                           for f in ("processes", "rss", "pss", "uss")))  # fmt: skip


@dataclass
class InFlight:
    """One worker's memory with `at_once` attempts in flight against none, at --concurrency
    `at_once` (medians over a window each)."""

    at_once: int
    running: int
    idle: Footprint
    busy: Footprint
    note: str = ""

    @property
    def per_attempt_uss(self) -> float:
        return (self.busy.uss - self.idle.uss) / max(self.running, 1)


@dataclass
class Drain:
    """One drain of `jobs` preloaded no-op jobs by `workers` processes (or pgbench clients).

    `rate` comes from the database's own completion times: the jobs completed after the first
    completion time, divided by the time from the first to the last. A system's start-up and
    shutdown are not counted, and a system that records completions in batches (one timestamp
    per flush) is not flattered by its first batch, whose work happened before the first
    timestamp. `wall` is from start to all done, start-up included.
    """

    system: str  # "jobq", "limit", "pgqueuer", "procrastinate", ...
    variant: str  # "default", "best", "INFO logs", ...
    database: str  # "postgresql", "mariadb", "sqlite"
    workers: int
    jobs: int
    completed: int = 0
    after_first: int = 0  # completions with a time later than the first completion's
    span: float = 0.0
    wall: float = 0.0
    load: float = 0.0  # 1-minute load average when the drain started
    settings: str = ""
    note: str = ""
    # CPU seconds spent while the jobs were being drained (first progress to drained):
    window_jobs: int = 0  # jobs drained within that window
    client_cpu: float | None = None  # every process of the system under test
    master_cpu: float | None = None  # jobq-supervise's master alone
    db_cpu: float | None = None  # the database server (PostgreSQL only)
    memory: Memory | None = None  # the system's summed RSS, PSS and USS while it ran

    def per_job_ms(self, seconds: float | None) -> str:
        if seconds is None or self.window_jobs == 0:
            return "-"
        return f"{seconds / self.window_jobs * 1000:.3f}"

    @property
    def rate(self) -> float:
        # For one completion per timestamp this is the usual (n - 1) / span.
        if self.after_first < 1 or self.span <= 0:
            return 0.0
        return self.after_first / self.span

    @property
    def ok(self) -> bool:
        return self.completed == self.jobs and not self.note


@dataclass
class Latency:
    system: str
    settings: str
    samples: list[float] = field(default_factory=list)  # enqueue call -> handler start, s
    after_commit: list[float] = field(default_factory=list)  # enqueue returned -> start, s
    sent: int = 0
    note: str = ""


@dataclass
class RenewalRound:
    """Rounds of one size on a fresh connection, as a new renewer would run them. psycopg
    prepares a statement on its 5th execution and PostgreSQL may switch a prepared statement
    to a generic plan after 5 more, so the first rounds and the steady state can differ."""

    claims: int
    rounds: int
    early_ms: float  # median of rounds 1-4: not yet prepared, planned for these parameters
    steady_ms: float  # median of the last 10 rounds: what a long-lived renewer sees
    max_ms: float
    statements_per_round: float | None
    extended: int


@dataclass
class MasterLoad:
    workers: int
    window: float
    master_cpu_share: float  # fraction of one core
    master_rss_mb: float
    helpers_cpu_share: float  # renewer + housekeeper
    helpers_rss_mb: float
    renew_statements: int | None
    rounds_expected: float
    in_progress: int
    note: str = ""
    # The largest of each sum over the window: the master alone, and its three helpers.
    master_memory: Footprint | None = None
    helpers_memory: Footprint | None = None


@dataclass
class Profile:
    workers: int
    samples: int
    self_top: list[tuple[str, float]]  # function, share of worker samples
    inclusive_top: list[tuple[str, float]]
    path: str
    outside_top: list[tuple[str, float]] = field(default_factory=list)  # outside round trips
    note: str = ""


@dataclass
class EnqueueRate:
    """Jobs enqueued in one transaction by one method, and how long it took."""

    database: str
    method: str
    jobs: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0


@dataclass
class Recovery:
    """Worker processes killed (SIGKILL) while holding jobs, and how long each kill delayed
    those jobs: from the kill to the last of them completed by another worker."""

    system: str
    variant: str
    settings: str
    held: list[int] = field(default_factory=list)  # jobs the killed worker held, per kill
    delays: list[float] = field(default_factory=list)  # seconds, per kill that recovered
    # The same for the jobs that had not started (one attempt counted: their own), per kill.
    released_delays: list[float] = field(default_factory=list)
    extra_attempts: int = 0  # attempts counted on those jobs beyond the one that completed
    note: str = ""


@dataclass
class HeldRounds:
    """One system's drains behind a held snapshot (measures/horizon.py): its baseline
    rate and each held round's, in jobs/s."""

    system: str
    settings: str
    baseline: float = 0.0
    rounds: list[float] = field(default_factory=list)
    note: str = ""
    scenario: str = "plain"  # what else the table holds (measures/horizon.py's Scenario)

    def ratio(self) -> float | None:
        if not self.rounds or not self.baseline:
            return None
        return self.rounds[-1] / self.baseline
