"""What the master has the housekeeper settle for a worker that died: each attempt it ran,
failed with why it died (or left to maintenance after its lease), and the others it held,
its completed ones acknowledged and its unstarted ones released."""

from __future__ import annotations

import logging

from .. import protocol
from ..outcomes import job_extra
from .attempts import Attempt
from .shared import Shared
from .states import LEFT_TO_MAINTENANCE, StopReason
from .workers import WorkerProcess

log = logging.getLogger("jobq")

# What an attempt is failed with when its child died, on its own (None) or stopped for a
# reason of the master's.
STOP_CAUSES: dict[StopReason | None, str] = {
    None: "The worker died",
    StopReason.JOB_TIMEOUT: "Job timed out",
    StopReason.SHUTDOWN: "Interrupted: the supervisor shut down",
    StopReason.CANCELLED: "its worker was stopped",
}


def orphaned(
    worker: WorkerProcess, lease: Attempt, how: str | None, shared: Shared
) -> protocol.FailAttempt | None:
    """What to fail an attempt a worker died running with (`how`: None if its processes
    may still run); None: it is left to maintenance after its lease."""
    claim = lease.claim
    if how is None:
        shared.metrics.unconfirmed.inc()
        log.error(
            "Job %d's processes still run after SIGKILL (worker %d)",
            claim.id,
            worker.pid,
            extra=job_extra(claim, "kill_unconfirmed"),
        )
    if worker.stop_reason in LEFT_TO_MAINTENANCE or how is None:
        # Its database was out of reach, or the job is someone else's already.
        log.warning(
            "Job %d was left to maintenance after its lease (worker %d stopped: %s)",
            claim.id,
            worker.pid,
            worker.stop_reason,
            extra=job_extra(claim, "left_to_maintenance"),
        )
        return None
    cause = STOP_CAUSES.get(worker.stop_reason, STOP_CAUSES[None])
    stopped = worker.stopped
    if stopped is not None and stopped is not lease:
        # A sibling in a concurrent worker: stopped with it, for another attempt.
        cause = f"Its worker was stopped for job {stopped.claim.id} ({worker.stop_reason})"
    elif worker.stop_reason is StopReason.JOB_TIMEOUT:
        cause += f" after {shared.config.job_timeout:g} s"
    (attempt,) = protocol.attempts([claim])
    return protocol.FailAttempt(attempt, f"{cause} (worker {worker.pid}, {how})")


def left_behind(worker: WorkerProcess) -> protocol.LeftBehind:
    """What the housekeeper settles for a dead worker, besides the attempt it ran: it
    acknowledges the completed attempts (token-guarded, so a crash loses no finished
    work), and releases at once, uncounted, every other row the worker's id is on, the
    claims it reported and those it died before reporting."""
    queued, completed = list(worker.queued), list(worker.completed.values())
    if queued or completed:
        log.info(
            "Worker %d left jobs %s claimed and never started, and jobs %s completed and "
            "not acknowledged: releasing and acknowledging them",
            worker.pid,
            ", ".join(map(str, queued)) or "none",
            ", ".join(str(lease.claim.id) for lease in completed) or "none",
            extra={"event": "left_behind", "worker": worker.pid},
        )
    return protocol.LeftBehind(
        worker.worker_id,
        protocol.attempts(lease.claim for lease in completed),
        [*worker.running, *worker.unrecorded],
    )
