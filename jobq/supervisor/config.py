"""The supervisor's settings and the timing rule that makes its fencing safe."""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

from ..errors import ConfigurationError
from ..lease_clock import FENCE_LEAD, RENEW_RETRY_PAUSE, exact, timing_budget
from ..options import BY_NAME, RENEWAL, declared
from ..pool_specs import PoolSpec, completed, conflict
from ..worker.settings import WorkerSettings

# Every term of lease_clock.timing_budget, as --help and refusals write it.
TIMING_RULE = (
    f"renew_interval + 2 x renew_timeout + {RENEW_RETRY_PAUSE:g} s + kill_grace + "
    f"{FENCE_LEAD:g} s + safety_margin < lease"
)
MINIMUMS: dict[str, float] = {o.name: o.minimum or 0.0 for o in RENEWAL}
# Rows of the fence table: the most attempts one supervisor's workers run at once (a worker
# takes one row per attempt it may run: its pool's concurrency). 128 bytes each.
FENCE_SLOTS = 8192
# A lease given alone leaves the timing rule this share of it as slack.
FITTED_SHARE = Decimal("0.9")


def fitted_timing(lease: float) -> dict[str, float]:
    """Renewal and fencing settings for a lease given alone.

    The declared defaults when they fit the timing rule (leases of about 35 s and up);
    below that, each is moved from its default towards its minimum by the same factor,
    so their sum takes 90% of the lease. Every lease over the minimums' own sum (5 s)
    then starts without four more flags.
    """
    terms = {o.name: (exact(o.default), exact(o.minimum or 0.0)) for o in RENEWAL}
    weight = {name: 2 if name == "renew_timeout" else 1 for name in terms}
    room = FITTED_SHARE * exact(lease) - exact(RENEW_RETRY_PAUSE) - exact(FENCE_LEAD)
    full = sum(weight[n] * default for n, (default, _) in terms.items())
    least = sum(weight[n] * low for n, (_, low) in terms.items())
    factor = max(Decimal(0), min(Decimal(1), (room - least) / (full - least)))
    # Rounded down to milliseconds, so the sum stays within its share.
    return {
        name: float((low + factor * (default - low)).quantize(Decimal("0.001"), "ROUND_DOWN"))
        for name, (default, low) in terms.items()
    }


@dataclass(frozen=True)
class SupervisorConfig:
    dsn: str
    app: str | None = None
    types: tuple[str, ...] = ()
    # --pool, each: in place of types, workers and concurrency, which make the only pool.
    pools: tuple[PoolSpec, ...] = ()
    lease: float = declared("lease")
    workers: int = declared("workers")
    renew_interval: float = declared("renew_interval")
    renew_timeout: float = declared("renew_timeout")
    kill_grace: float = declared("kill_grace")
    safety_margin: float = declared("safety_margin")
    job_timeout: float | None = declared("job_timeout")
    graceful_timeout: float = declared("graceful_timeout")
    max_jobs_per_child: int | None = declared("max_jobs_per_child")
    max_memory_per_child: float | None = declared("max_memory_per_child")
    prefetch: int | None = declared("prefetch")
    concurrency: int = declared("concurrency")
    poll_interval: float = declared("poll_interval")
    maintenance_interval: float = declared("maintenance_interval")
    horizon_warning: float = declared("horizon_warning")
    retain_completed: float = declared("retain_completed")
    retain_failed: float = declared("retain_failed")
    metrics_address: str = declared("metrics_address")
    metrics_port: int | None = declared("metrics_port")
    migrate: bool = declared("migrate")
    exit_when_empty: bool = declared("exit_when_empty")
    preload: bool = declared("preload")
    # Kubernetes' terminationGracePeriodSeconds, when the deployment passes it on: the pod is
    # killed that long after SIGTERM, drain or not.
    termination_grace_period: float | None = None
    # A direct PostgreSQL connection for wake-ups, when dsn goes through a transaction pooler.
    listen_dsn: str | None = None

    def timing_budget(self) -> Decimal:
        """See lease_clock.timing_budget."""
        return timing_budget(
            self.renew_interval, self.renew_timeout, self.kill_grace, self.safety_margin
        )

    def problems(self) -> list[str]:
        found = []
        for name, declaration in BY_NAME.items():
            problem = declaration.problem(getattr(self, name, None))
            if problem is not None:
                found.append(f"{declaration.flag} {problem}")
        terms = (*MINIMUMS, "lease")
        if all(math.isfinite(getattr(self, name)) for name in terms) and (
            self.timing_budget() >= exact(self.lease)
        ):
            found.append(
                f"the timing rule {TIMING_RULE} does not hold: "
                f"{self.renew_interval:g} + 2 x {self.renew_timeout:g} + {RENEW_RETRY_PAUSE:g} + "
                f"{self.kill_grace:g} + {FENCE_LEAD:g} + {self.safety_margin:g} = "
                f"{float(self.timing_budget()):g} s, not below the {self.lease:g} s lease"
            )
        clash = conflict(self.pools)
        if clash is not None:
            found.append(clash)
        at_once = sum(pool.workers * pool.concurrency for pool in self.pool_specs())
        if at_once > FENCE_SLOTS:
            found.append(
                f"the workers would run {at_once} attempts at once (workers x concurrency, every "
                f"pool's), more than the {FENCE_SLOTS} one supervisor can fence: run fewer "
                "workers, or a second supervisor"
            )
        drain = self.graceful_timeout + self.kill_grace
        if self.termination_grace_period is not None and self.termination_grace_period <= drain:
            found.append(
                f"the termination grace period ({self.termination_grace_period:g} s) must be "
                f"longer than graceful_timeout + kill_grace ({self.graceful_timeout:g} + "
                f"{self.kill_grace:g} s): otherwise the pod is killed before a drain can end"
            )
        return found

    def check(self) -> None:
        found = self.problems()
        if found:
            raise ConfigurationError("refusing to start:\n  " + "\n  ".join(found))

    def pool_specs(self) -> tuple[PoolSpec, ...]:
        """Every pool, in the order given; without --pool, the one of --type and --workers."""
        if self.pools:
            return completed(self.pools)
        return (PoolSpec(self.types, self.workers, self.concurrency),)

    def worker_settings(self, pool: PoolSpec) -> WorkerSettings:
        return WorkerSettings(
            dsn=self.dsn,
            lease=self.lease,
            types=pool.types,
            others=pool.others,
            pool=pool.name if self.pools else None,
            poll_interval=self.poll_interval,
            safety_margin=self.safety_margin,
            max_jobs=self.max_jobs_per_child,
            max_memory_mib=self.max_memory_per_child,
            app=self.app,
            listen_dsn=self.listen_dsn,
            prefetch=self.prefetch,
            concurrency=pool.concurrency,
        )
