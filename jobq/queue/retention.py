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
        """Seconds between cleaner runs (math.inf when nothing is pruned): every maintenance
        run's, so that a job outlives its retention by one interval at most. A run that finds
        nothing to delete costs a probe of the pruning index per status (backends/pruning.py),
        however many finished jobs are kept."""
        return maintenance_interval if self.groups() else math.inf

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
