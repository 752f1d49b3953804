"""The supervisor's Prometheus metrics. The master owns every one of them: workers report
their events over the socket they already use, so nothing is lost when a worker is killed
and there are no multiprocess files to clean up.

Labels are bounded: job types, pool names (their types, as --pool gave them) and fixed
words, never a job id or an error text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .. import __version__
from ..schedules.scheduler import Slot
from .states import Helper, StopReason, WorkerState

# "unacknowledged": the worker could not record the outcome (the database went away); the
# attempt's lease runs out and the job is retried.
# "suspended": the job suspended itself (jobq.sleep, wait_for, gather), not counted.
FAILURE_OUTCOMES = (
    "retried",
    "failed",
    "expired",
    "lost",
    "unacknowledged",
    "cancelled",
    "suspended",
)
RUN_TIME_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800, 3600)
# A scrape shows queue-depth figures read at most this long before it.
DEPTH_FRESH = 2.0
ROUND_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
# A cleaner run: milliseconds when little is due, minutes when a backlog of millions is.
PRUNE_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300)
SLOT_OUTCOMES = tuple(str(outcome) for outcome in Slot)
HELPER_RESTART_REASONS = ("exited", "unresponsive", "fork_failed")
# jobq_workers' states: a worker that is still starting is neither.
COUNTED_STATES = (WorkerState.BUSY, WorkerState.IDLE)
SLOT_STATES = ("busy", "free")
# A pool's workers by state, and its ready workers' (busy, free) slots.
PoolFigures = tuple[Mapping[WorkerState, int], tuple[int, int]]


class QueueDepth(Collector):
    """Queue depth and the age of the oldest ready job, as last read from the database.

    Read by the housekeeper when a scrape finds the figures older than DEPTH_FRESH, and after
    each maintenance run when /metrics is served: a scrape that asks waits for the answer
    (see Endpoint.holds), so it shows figures at most that old.
    """

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}
        self.oldest: dict[str, float] = {}
        self.paused: set[str] = set()
        # (type, limit, slots in use, jobs blocked): per type, never per key, so bounded.
        self.limits: tuple[tuple[str, str, int, int], ...] = ()
        self.read_at = float("-inf")  # monotonic: when the last figures arrived
        self.asked_at = float("-inf")

    def update(
        self,
        counts: Iterable[tuple[str, str, int]],
        oldest: dict[str, float],
        now: float,
        paused: Iterable[str] = (),
        limits: Iterable[tuple[str, str, int, int]] = (),
    ) -> None:
        self.counts = {(name, status): n for name, status, n in counts}
        self.oldest = dict(oldest)
        self.paused = set(paused)
        self.limits = tuple(limits)
        self.read_at = now

    def stale(self, now: float) -> bool:
        return now - self.read_at >= DEPTH_FRESH

    def ask(self, now: float) -> bool:
        """Whether a reading must be asked for now: the figures are stale, and no reading
        asked for recently is still on its way."""
        under_way = self.asked_at > self.read_at and now - self.asked_at < DEPTH_FRESH
        if under_way or not self.stale(now):
            return False
        self.asked_at = now
        return True

    def collect(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily(
            "jobq_queue_jobs", "Jobs in the database by type and status", labels=["type", "status"]
        )
        for (name, status), n in sorted(self.counts.items()):
            depth.add_metric([name, status], n)
        yield depth
        age = GaugeMetricFamily(
            "jobq_queue_oldest_ready_age_seconds",
            "How long the oldest job that is ready to run has been waiting, by type",
            labels=["type"],
        )
        types = {name for name, _ in self.counts} | set(self.oldest)
        for name in sorted(types):
            age.add_metric([name], self.oldest.get(name, 0.0))
        yield age
        paused = GaugeMetricFamily(
            "jobq_type_paused",
            "1 for a job type an operator paused (jobq pause), 0 for one that runs",
            labels=["type"],
        )
        for name in sorted(types | self.paused):
            paused.add_metric([name], 1.0 if name in self.paused else 0.0)
        yield paused
        yield from self.collect_limits()

    def collect_limits(self) -> Iterator[Metric]:
        in_use = GaugeMetricFamily(
            "jobq_limit_slots_in_use",
            "Attempts holding a slot of a concurrency limit (in progress, lease live), or "
            "starts within a rate limit's window, all keys of the type together",
            labels=["type", "limit"],
        )
        blocked = GaugeMetricFamily(
            "jobq_jobs_blocked", "Pending jobs waiting for a concurrency slot", labels=["type"]
        )
        waiting_by_type: dict[str, int] = {}
        for name, limit, slots, waiting in sorted(self.limits):
            in_use.add_metric([name, limit], slots)
            waiting_by_type[name] = waiting_by_type.get(name, 0) + waiting
        for name, waiting in waiting_by_type.items():
            blocked.add_metric([name], waiting)
        yield in_use
        yield blocked


@dataclass(frozen=True)
class TypeSeries:
    """One job type's labelled series, looked up once."""

    claimed: Counter
    completed: Counter
    released: Counter
    run_time: Histogram


class Metrics:
    def __init__(self, database: str, lease: float, renew_interval: float) -> None:
        # The *_created series only restate the start time of every labelled counter.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        registry = self.registry = CollectorRegistry()
        self.claimed = Counter(
            "jobq_jobs_claimed", "Attempts claimed by workers", ["type"], registry=registry
        )
        self.completed = Counter(
            "jobq_jobs_completed", "Attempts that completed", ["type"], registry=registry
        )
        self.released = Counter(
            "jobq_jobs_released",
            "Attempts claimed ahead (--prefetch) and given back unstarted, not counted",
            ["type"],
            registry=registry,
        )
        self.failed = Counter(
            "jobq_jobs_failed",
            "Attempts that did not complete, by what followed: retried, failed (no attempts "
            "left), expired (past the deadline), lost (the acknowledgement was refused) or "
            "cancelled (an operator cancelled the job while it ran); suspended: the job "
            "suspended itself to run again later (jobq.sleep, wait_for, gather), uncounted",
            ["type", "outcome"],
            registry=registry,
        )
        self.run_time = Histogram(
            "jobq_job_run_seconds",
            "Time from an attempt's start to its acknowledgement, or to the next start",
            ["type"],
            buckets=RUN_TIME_BUCKETS,
            registry=registry,
        )
        self.renewals = Counter(
            "jobq_lease_renewals",
            "Lease renewals, one per claim per round: extended, lost (another attempt owns the "
            "job) or error (the round failed or timed out)",
            ["result"],
            registry=registry,
        )
        self.round_time = Histogram(
            "jobq_renewal_round_seconds",
            "Round trip of one batched renewal round",
            buckets=ROUND_BUCKETS,
            registry=registry,
        )
        self.killed = Counter(
            "jobq_workers_killed",
            "Workers stopped by the master or recycled, by reason: renewal (the lease could not "
            "be renewed in time), self_fence (the fence keeper killed it for that reason while "
            "the master did not), lost, job_timeout, memory, shutdown, cancelled (an operator "
            "cancelled its job), strays (a job left processes its worker could not tell from "
            "another attempt's)",
            ["pool", "reason"],
            registry=registry,
        )
        self.horizon_age = Gauge(
            "jobq_database_horizon_age_seconds",
            "How long the oldest holder of the database's cleanup horizon (an open "
            "transaction's snapshot, a prepared transaction) has held it; NaN where the "
            "database cannot tell (SQLite, a PostgreSQL replication slot)",
            registry=registry,
        )
        self.horizon_backlog = Gauge(
            "jobq_database_horizon_backlog",
            "What waits for cleanup behind that horizon: transactions on PostgreSQL, the "
            "history list length on MariaDB, WAL frames not checkpointed on SQLite",
            registry=registry,
        )
        self.unconfirmed = Counter(
            "jobq_attempt_kills_unconfirmed",
            "Attempts whose processes were still running after SIGKILL, when the master "
            "buried their worker",
            registry=registry,
        )
        self.restarts = Counter(
            "jobq_worker_restarts",
            "Workers started to replace one that exited",
            ["pool"],
            registry=registry,
        )
        self.helper_restarts = Counter(
            "jobq_helper_restarts",
            "Starts of a helper process (renewer, housekeeper, fence_keeper) to replace one, by "
            "why: exited (it died: killed, crashed), unresponsive (a renewal round timed out) "
            "or fork_failed (the start itself failed, and is retried with backoff)",
            ["helper", "reason"],
            registry=registry,
        )
        self.helpers_up = Gauge(
            "jobq_helper_up",
            "Whether each helper process runs (1) or is missing, waiting to be started (0)",
            ["helper"],
            registry=registry,
        )
        self.workers = Gauge(
            "jobq_workers",
            "Worker processes by pool and state: busy or idle",
            ["pool", "state"],
            registry=registry,
        )
        self.slots = Gauge(
            "jobq_worker_slots",
            "Attempts the ready workers run (busy) and could run besides (free): --concurrency "
            "slots each",
            ["pool", "state"],
            registry=registry,
        )
        self.memory = Gauge(
            "jobq_worker_memory_bytes",
            "Resident memory of the workers: the largest one (max) and all together (sum)",
            ["stat"],
            registry=registry,
        )
        self.recovered = Counter(
            "jobq_maintenance_recovered",
            "Jobs maintenance recovered from ended leases (requeued, failed, expired) or "
            "expired while pending",
            ["outcome"],
            registry=registry,
        )
        self.pruned = Counter(
            "jobq_retention_pruned",
            "Finished jobs the job cleaner deleted, past --retain-completed or --retain-failed",
            registry=registry,
        )
        self.prune_time = Histogram(
            "jobq_retention_run_seconds",
            "How long each of the job cleaner's runs took (its count: the runs)",
            buckets=PRUNE_BUCKETS,
            registry=registry,
        )
        self.oldest_finished = Gauge(
            "jobq_retention_oldest_finished_seconds",
            "Age of the oldest finished job still kept, read after each of the job cleaner's "
            "runs: well past the longest retention, the cleaner is falling behind or another "
            "job still needs it (0: none is kept)",
            registry=registry,
        )
        self.schedule_slots = Counter(
            "jobq_schedule_slots",
            "Slots of periodic jobs this supervisor took, by schedule and outcome: enqueued, "
            "skipped_overlap (the previous job was still active) or skipped_missed (found too "
            "late, without catch-up)",
            ["schedule", "outcome"],
            registry=registry,
        )
        self.accept_errors = Counter(
            "jobq_accept_errors",
            "Connections the master could not accept, by listener: metrics (the --metrics-port "
            "endpoint) or control (jobq-supervise ctl's socket); each error, such as EMFILE at "
            "the file limit, pauses that listener briefly",
            ["listener"],
            registry=registry,
        )
        for listener in ("metrics", "control"):
            self.accept_errors.labels(listener)
        self.depth = QueueDepth()
        registry.register(self.depth)
        Info("jobq_supervisor", "This supervisor's version and settings", registry=registry).info(
            {
                "version": __version__,
                "database": database,
                "lease_seconds": f"{lease:g}",
                "renew_interval_seconds": f"{renew_interval:g}",
            }
        )
        for result in ("extended", "lost", "error"):
            self.renewals.labels(result)
        for helper in Helper:
            self.helpers_up.labels(helper.event)
            for why in HELPER_RESTART_REASONS:
                self.helper_restarts.labels(helper.event, why)
        for outcome in ("requeued", "failed", "expired"):
            self.recovered.labels(outcome)
        self.per_type: dict[str, TypeSeries] = {}

    def know_pool(self, pool: str) -> None:
        """A pool's series, at zero from the start (see know_type)."""
        for state in COUNTED_STATES:
            self.workers.labels(pool, state)
        for taken in SLOT_STATES:
            self.slots.labels(pool, taken)
        for reason in StopReason:
            self.killed.labels(pool, reason)
        self.restarts.labels(pool)

    def know_type(self, job_type: str) -> TypeSeries:
        """A type's series, created at zero before its first event: Prometheus does not count
        a series' first sample as a rise from zero, so an unannounced first burst would be
        invisible to rate(). Kept, so that a job's events need no label lookups."""
        series = self.per_type.get(job_type)
        if series is None:
            series = TypeSeries(
                self.claimed.labels(job_type),
                self.completed.labels(job_type),
                self.released.labels(job_type),
                self.run_time.labels(job_type),
            )
            self.per_type[job_type] = series
            for outcome in FAILURE_OUTCOMES:
                self.failed.labels(job_type, outcome)
        return series

    def on_claimed(self, job_type: str) -> None:
        self.know_type(job_type).claimed.inc()

    def on_released(self, job_type: str) -> None:
        self.know_type(job_type).released.inc()

    def on_finished(self, job_type: str, outcome: str, seconds: float) -> None:
        series = self.know_type(job_type)
        if outcome == "completed":
            series.completed.inc()
        else:
            self.failed.labels(job_type, outcome).inc()
        series.run_time.observe(seconds)

    def on_round(self, seconds: float, extended: int, lost: int) -> None:
        self.round_time.observe(seconds)
        self.renewals.labels("extended").inc(extended)
        self.renewals.labels("lost").inc(lost)

    def on_maintained(self, counts: dict[str, int]) -> None:
        for outcome, n in counts.items():
            self.recovered.labels(outcome).inc(n)

    def on_pruned(self, deleted: int, seconds: float, oldest: float | None) -> None:
        self.pruned.inc(deleted)
        self.prune_time.observe(seconds)
        self.oldest_finished.set(oldest or 0.0)

    def on_scheduled(self, slots: Sequence[tuple[str, str]], declared: Iterable[str] = ()) -> None:
        # Every outcome's series starts at zero, from the declaration or at the latest with
        # the schedule's first slot, so that rate() sees the first one.
        for name in {*declared, *(name for name, _ in slots)}:
            for known in SLOT_OUTCOMES:
                self.schedule_slots.labels(name, known)
        for name, outcome in slots:
            self.schedule_slots.labels(name, outcome).inc()

    def on_depth(
        self,
        counts: Iterable[tuple[str, str, int]],
        oldest: dict[str, float],
        now: float,
        paused: Iterable[str] = (),
        limits: Iterable[tuple[str, str, int, int]] = (),
    ) -> None:
        self.depth.update(counts, oldest, now, paused, limits)
        for name, _, _ in counts:
            self.know_type(name)

    def on_workers(self, pools: Mapping[str, PoolFigures], rss: list[int]) -> None:
        """Each pool's workers by state and (busy, free) slots, and all workers' memory."""
        for pool, (states, slots) in pools.items():
            for state in COUNTED_STATES:
                self.workers.labels(pool, state).set(states.get(state, 0))
            for taken, n in zip(SLOT_STATES, slots, strict=True):
                self.slots.labels(pool, taken).set(n)
        self.memory.labels("max").set(max(rss, default=0))
        self.memory.labels("sum").set(sum(rss))
