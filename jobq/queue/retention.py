"""The job cleaner: the supervisor's maintenance deletes finished jobs once they are older
than the retention in force (--retain-completed, --retain-failed), as River's cleaner and
Solid Queue's clear_finished_jobs do, so that a deployment without a `jobq prune` cron
entry does not grow its jobs table without bound.

It prunes as `jobq prune` does (maintenance.prune: bounded batches, each its own short
transaction, keeping what other jobs still need), one process at a time across every node.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

from ..backends.base import Backend
from ..options import RETENTION, shown_duration
from ..records import Status
from . import maintenance

log = logging.getLogger("jobq")

COMPLETED, FAILED = RETENTION
# A cleaner run comes this many times per shortest retention, so a job outlives its
# retention by a tenth of it at most; never less often than every CLEAN_AT_LEAST seconds.
# Each run reads the finished rows (no index orders them by their end): with a day's
# retention, once every 5 minutes, not at every maintenance run.
RUNS_PER_RETENTION = 10
CLEAN_AT_LEAST = 300.0


@dataclass(frozen=True)
class Retention:
    """How long finished jobs are kept, in seconds (math.inf: for ever)."""

    completed: float = COMPLETED.default  # and cancelled
    failed: float = FAILED.default  # and expired

    def groups(self) -> list[tuple[float, tuple[Status, ...]]]:
        """The statuses pruned after each retention, those kept for ever left out."""
        groups = [
            (self.completed, (Status.COMPLETED, Status.CANCELLED)),
            (self.failed, (Status.FAILED, Status.EXPIRED)),
        ]
        return [(seconds, statuses) for seconds, statuses in groups if math.isfinite(seconds)]

    def interval(self, maintenance_interval: float) -> float:
        """Seconds between cleaner runs (math.inf when nothing is pruned)."""
        shortest = min(self.completed, self.failed)
        if not math.isfinite(shortest):
            return math.inf
        return max(maintenance_interval, min(shortest / RUNS_PER_RETENTION, CLEAN_AT_LEAST))

    def describe(self) -> str:
        return (
            f"completed and cancelled jobs kept {shown_duration(self.completed)}, "
            f"failed and expired {shown_duration(self.failed)}"
        )


@dataclass(frozen=True)
class Cleaned:
    """One cleaner run: jobs deleted, its duration, and whether another process was
    pruning (this run then left the rest to it)."""

    pruned: int
    seconds: float
    left_to_another: bool


def clean(backend: Backend, retention: Retention) -> Cleaned:
    """Delete the finished jobs older than their retention."""
    started = time.monotonic()
    pruned, contended = 0, False
    for seconds, statuses in retention.groups():
        run = maintenance.prune(backend, seconds, statuses)
        pruned += run.deleted
        if run.left_to_another:
            contended = True
            break
    cleaned = Cleaned(pruned, time.monotonic() - started, contended)
    if contended:
        log.info(
            "Retention: another process is pruning; this run leaves the rest to it",
            extra={"event": "retention_left"},
        )
    if pruned:
        log.info(
            "Retention: deleted %d finished job(s) in %.3f s",
            pruned,
            cleaned.seconds,
            extra={"event": "retention"},
        )
    return cleaned
