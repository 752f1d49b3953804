"""The words the supervisor keeps its state in. Log lines, the master's process title and the
metrics' label sets are all written from these, so a new reason or state appears everywhere
at once, or nowhere."""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    """The master's: starting, then running until TERM/INT (draining) or QUIT or a crash loop
    (stopping), and stopped once its last worker is gone."""

    STARTING = "starting"
    RUNNING = "running"
    DRAINING = "draining"
    STOPPING = "stopping"
    STOPPED = "stopped"


class WorkerState(StrEnum):
    STARTING = "starting"  # forked, not ready yet: it has not made its first claim
    IDLE = "idle"
    BUSY = "busy"  # it holds an attempt's lease


class StopReason(StrEnum):
    """Why a worker was stopped, or recycled itself: jobq_workers_killed_total's reasons."""

    RENEWAL = "renewal"  # its lease could not be renewed in time
    SELF_FENCE = "self_fence"  # the fence keeper killed it for that, the master being late
    LOST = "lost"  # another attempt owns its job
    JOB_TIMEOUT = "job_timeout"
    MEMORY = "memory"  # it recycled itself past --max-memory-per-child; never the master's
    SHUTDOWN = "shutdown"
    CANCELLED = "cancelled"  # an operator cancelled its job
    # It stopped itself: a job left processes it could not tell from another attempt's.
    STRAYS = "strays"


# An attempt stopped for these is left to maintenance after its lease: its database was out
# of reach, or the job is someone else's already.
LEFT_TO_MAINTENANCE = (StopReason.RENEWAL, StopReason.LOST, StopReason.SELF_FENCE)


class Helper(StrEnum):
    """The master's own processes besides its workers."""

    RENEWER = "renewer"
    HOUSEKEEPER = "housekeeper"
    KEEPER = "fence keeper"

    @property
    def event(self) -> str:
        """The log event of its unexpected exit."""
        return self.value.replace(" ", "_")
