"""How the master stops its workers, whichever pool they are in: it tells one to drain, fences
the attempts whose leases cannot be renewed in time or that ran too long, stops a cancelled
job, and kills what does not stop. A worker's own slots say how it is stopped: a concurrent
one (--concurrency above 1) can stop one attempt alone."""

from __future__ import annotations

import logging

from .. import lease_clock, protocol
from ..outcomes import job_extra
from .attempts import Attempt
from .config import SupervisorConfig
from .shared import Shared
from .states import StopReason
from .workers import WorkerProcess

log = logging.getLogger("jobq")

# What the log says as the master stops a worker's running attempt: level, text, event.
STOPPING: dict[StopReason, tuple[int, str, str]] = {
    StopReason.RENEWAL: (
        logging.ERROR,
        "Lease of job %d cannot be renewed in time: stopped worker %d",
        "fenced",
    ),
    StopReason.JOB_TIMEOUT: (
        logging.WARNING,
        "Job %d ran past --job-timeout: stopped worker %d",
        "job_timeout",
    ),
    StopReason.CANCELLED: (
        logging.WARNING,
        "Job %d was cancelled: stopped worker %d",
        "cancel_stop",
    ),
}


def of_pool(config: SupervisorConfig, pool: str) -> str:
    """What a log line says of a worker's pool: nothing without --pool, as before pools."""
    return f" of pool {pool}" if config.pools else ""


class Stopper:
    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.config = shared.config

    def stop_point(self, lease: Attempt) -> float:
        config = self.config
        return lease_clock.stop_point(lease.expires, config.safety_margin, config.kill_grace)

    # -- draining --------------------------------------------------------------------------

    def retire(self, worker: WorkerProcess, why: str) -> None:
        if worker.retiring:
            return
        log.info(
            "Retiring worker %d%s (%s)",
            worker.pid,
            of_pool(self.config, worker.pool),
            why,
            extra={"event": "retiring", "pool": worker.pool},
        )
        self.drain(worker)

    def drain(self, worker: WorkerProcess) -> None:
        """Tell it to finish what it holds, claim nothing more, and exit."""
        worker.retiring = True
        if worker.ready:  # else it is told once it says it is ready
            self.tell_drain(worker)

    def tell_drain(self, worker: WorkerProcess) -> None:
        self.send(worker, protocol.Drain())

    def send(self, worker: WorkerProcess, message: protocol.Message | None) -> None:
        """Send it a message, or (None) what waits of the earlier ones."""
        try:
            if message is None:
                worker.process.outbox.flush()
            else:
                worker.process.outbox.put(message)
        except OSError as error:
            # Its end is closed: it is exiting already, and its reaping settles the rest.
            log.info(
                "Worker %d could not be told to drain (%s): it is exiting",
                worker.pid,
                error,
                extra={"event": "drain_unsent", "worker": worker.pid},
            )

    # -- fencing ---------------------------------------------------------------------------

    def fence(self, worker: WorkerProcess, now: float) -> None:
        """Stop the worker if an attempt's lease cannot be renewed in time or its job ran too
        long, and kill it if its kill grace ran out."""
        for lease in list(worker.running.values()):
            if worker.stop_reason is not None:
                break
            stopping = lease.alone
            if stopping is not None:
                # Still running after its kill grace: a thread, or a coroutine that
                # swallowed its cancel. Only killing the whole worker stops it.
                deadline, reason = stopping
                if now >= deadline:
                    self.stop(worker, reason, now, at_once=True, for_attempt=lease)
                continue
            # Each stop is signalled before it is logged: a log write can block.
            if now >= self.stop_point(lease):
                self.stop_attempt(worker, lease, StopReason.RENEWAL, now)
            elif self.config.job_timeout and now - lease.started >= self.config.job_timeout:
                self.stop_attempt(worker, lease, StopReason.JOB_TIMEOUT, now)
        if worker.kill_at is not None and not worker.killed and now >= worker.kill_at:
            worker.kill()

    def next_due(self, worker: WorkerProcess) -> float:
        """The next moment the worker must be stopped or killed."""
        times = [float("inf")]
        if worker.kill_at is not None and not worker.killed:
            times.append(worker.kill_at)
        if worker.stop_reason is not None:
            return min(times)
        for lease in worker.running.values():
            stopping = lease.alone
            if stopping is not None:
                times.append(stopping[0])
                continue
            times.append(self.stop_point(lease))
            if self.config.job_timeout:
                times.append(lease.started + self.config.job_timeout)
        return min(times)

    def cancel(self, worker: WorkerProcess, lease: Attempt, now: float) -> None:
        """Stop a worker whose job an operator cancelled, as any fence stops one: SIGTERM to
        its attempt's processes, SIGKILL at the kill grace. Once it is buried, its attempt is
        ended cancelled (the database refuses to settle it otherwise)."""
        if lease.runs and lease.alone is None and worker.stop_reason is None:
            self.stop_attempt(worker, lease, StopReason.CANCELLED, now)

    def stop_attempt(
        self, worker: WorkerProcess, lease: Attempt, reason: StopReason, now: float
    ) -> None:
        """Stop an attempt a worker runs, saying why: the whole worker, with every attempt it
        runs (a thread cannot be stopped alone)."""
        claim = lease.claim
        if len(worker.slots) > 1:  # a concurrent worker: one fence row per attempt at once
            self.stop_alone(worker, lease, reason, now)
        else:
            self.stop(worker, reason, now, for_attempt=lease)
        level, text, event = STOPPING[reason]  # after the signals: a log write can block
        log.log(level, text, claim.id, worker.pid, extra=job_extra(claim, event))

    def stop_alone(
        self, worker: WorkerProcess, lease: Attempt, reason: StopReason, now: float
    ) -> None:
        """Ask a concurrent worker to stop one attempt (a coroutine is cancelled), and kill the
        whole worker if it still runs after the kill grace, or at its lease's kill point if
        that comes first."""
        config = self.config
        deadline = lease_clock.kill_at(now, config.kill_grace, lease.expires, config.safety_margin)
        if deadline <= now:
            self.stop(worker, reason, now, at_once=True, for_attempt=lease)
            return
        worker.attempts.stop_alone(lease, reason, deadline)
        claim = lease.claim
        self.send(worker, protocol.Stop(claim.id, claim.token, self.stop_cause(reason)))

    def stop_cause(self, reason: StopReason) -> str:
        """What an attempt stopped alone is failed with."""
        if reason is StopReason.JOB_TIMEOUT:
            return f"Job timed out after {self.config.job_timeout:g} s: cancelled"
        if reason is StopReason.CANCELLED:
            return "Cancelled while it ran"
        return "Stopped: its lease could not be renewed in time"

    def stop(
        self,
        worker: WorkerProcess,
        reason: StopReason,
        now: float,
        at_once: bool = False,
        for_attempt: Attempt | None = None,
    ) -> None:
        """SIGTERM to its whole attempt now, and SIGKILL after the kill grace, or at the
        lease's kill point if that comes first.

        It is told to drain too: a job whose own SIGTERM handler ends its attempt leaves a
        worker that claims nothing more and exits. The stop belongs to that attempt: once it
        ended, the SIGKILL is called off (see WorkerProcess.ended), so that it cannot hit
        the next job the worker may have claimed with its acknowledgement. A shutdown's stop
        is the whole worker's, and stays."""
        worker.stop_for(
            reason, None if reason is StopReason.SHUTDOWN else for_attempt or worker.earliest
        )
        # The kill comes before the earliest kill point of all the attempts it runs.
        earliest = worker.earliest
        expires = None if earliest is None else earliest.expires
        config = self.config
        kill_at = lease_clock.kill_at(now, config.kill_grace, expires, config.safety_margin)
        if at_once or kill_at <= now:
            worker.kill()
        else:
            worker.terminate()
            worker.kill_at = kill_at
            # After the signal, which nothing may delay; the job's own handler must first
            # run and return, so the drain is heard before the worker could claim again.
            self.drain(worker)
        # After the signal, which is urgent.
        self.shared.metrics.killed.labels(worker.pool, reason).inc()
