"""The supervisor's settings and the timing rule that makes its fencing safe."""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

from ..errors import ConfigurationError
from ..worker.settings import WorkerSettings

# The pause before a failed or timed-out renewal round is tried once more.
RENEW_RETRY_PAUSE = 1.0

MINIMUMS = {"renew_interval": 1.0, "renew_timeout": 1.0, "kill_grace": 0.0, "safety_margin": 1.0}


def exact(seconds: float) -> Decimal:
    return Decimal(repr(seconds))


def option(name: str) -> str:
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class SupervisorConfig:
    dsn: str
    app: str | None = None
    types: tuple[str, ...] = ()
    lease: float = 600.0
    workers: int = 4
    renew_interval: float = 10.0
    renew_timeout: float = 5.0
    kill_grace: float = 5.0
    safety_margin: float = 5.0
    job_timeout: float | None = None
    graceful_timeout: float = 30.0
    max_jobs_per_child: int | None = None
    max_memory_per_child: float | None = None
    poll_interval: float = 1.0
    maintenance_interval: float = 10.0
    metrics_address: str = "127.0.0.1"
    metrics_port: int | None = None
    # Kubernetes' terminationGracePeriodSeconds, when the deployment passes it on: the pod is
    # killed that long after SIGTERM, drain or not.
    termination_grace_period: float | None = None
    # A direct PostgreSQL connection for wake-ups, when dsn goes through a transaction pooler.
    listen_dsn: str | None = None

    def timing_budget(self) -> Decimal:
        """How long a lease must outlast its last confirmed renewal, at worst: the next
        round, a timed-out try and its retry, the kill grace and the safety margin.

        In decimal, as the options were written: a binary float sum of 1 + 2 + 1 + 0.1 + 1.1
        falls just short of 5.2 and would let a lease of exactly the budget through."""
        return (
            exact(self.renew_interval)
            + 2 * exact(self.renew_timeout)
            + exact(RENEW_RETRY_PAUSE)
            + exact(self.kill_grace)
            + exact(self.safety_margin)
        )

    def problems(self) -> list[str]:
        durations = (*MINIMUMS, "lease", "graceful_timeout", "poll_interval")
        infinite = [option(n) for n in durations if not math.isfinite(getattr(self, n))]
        if infinite:
            return [f"{', '.join(infinite)} must be finite numbers of seconds"]
        found = [
            f"{option(name)} must be at least {minimum:g} s, got {getattr(self, name):g}"
            for name, minimum in MINIMUMS.items()
            if getattr(self, name) < minimum
        ]
        if self.timing_budget() >= exact(self.lease):
            found.append(
                "the timing rule renew_interval + 2 x renew_timeout + 1 s + kill_grace + "
                f"safety_margin < lease does not hold: {self.renew_interval:g} + "
                f"2 x {self.renew_timeout:g} + {RENEW_RETRY_PAUSE:g} + {self.kill_grace:g} + "
                f"{self.safety_margin:g} = {float(self.timing_budget()):g} s, not below the "
                f"{self.lease:g} s lease"
            )
        if self.workers < 1:
            found.append(f"--workers must be at least 1, got {self.workers}")
        for name in ("graceful_timeout", "poll_interval", "maintenance_interval"):
            if getattr(self, name) <= 0:
                found.append(f"{option(name)} must be positive")
        if self.job_timeout is not None and self.job_timeout <= 0:
            found.append("--job-timeout must be positive")
        drain = self.graceful_timeout + self.kill_grace
        if self.termination_grace_period is not None and self.termination_grace_period <= drain:
            found.append(
                f"the termination grace period ({self.termination_grace_period:g} s) must be "
                f"longer than graceful_timeout + kill_grace ({self.graceful_timeout:g} + "
                f"{self.kill_grace:g} s): otherwise the pod is killed before a drain can end"
            )
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            found.append(f"--metrics-port must be a port number, got {self.metrics_port}")
        return found

    def check(self) -> None:
        found = self.problems()
        if found:
            raise ConfigurationError("refusing to start:\n  " + "\n  ".join(found))

    def worker_settings(self) -> WorkerSettings:
        return WorkerSettings(
            dsn=self.dsn,
            lease=self.lease,
            types=self.types,
            poll_interval=self.poll_interval,
            safety_margin=self.safety_margin,
            max_jobs=self.max_jobs_per_child,
            max_memory_mib=self.max_memory_per_child,
            listen_dsn=self.listen_dsn,
        )
