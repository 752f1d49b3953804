"""The pool: the master's record of its workers, and the rules that keep it the size it
should be (spawn, retire, rotate after a reload, stop, bury, back off from a crash loop)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import selectors
import signal
import time
from collections.abc import Iterable

import psutil

from .. import lease_clock, protocol
from ..outcomes import job_extra
from ..queue.running import new_worker_id
from ..worker import child, kinds
from ..worker.fence import FenceTable
from ..worker.mark import SettlingMark
from .forking import fork
from .shared import Shared
from .states import StopReason
from .workers import Lease, WorkerProcess

log = logging.getLogger("jobq")

# This many children in a row exiting before they were ready is a crash loop.
CRASH_LOOP_LIMIT = 5
MAX_SPAWN_BACKOFF = 10.0
# Rows of the fence table: the most attempts one supervisor's workers run at once (a worker
# takes one row per attempt it may run: --concurrency). 128 bytes each.
FENCE_SLOTS = 8192
# Exits a worker makes on purpose: they are not restarts in the metrics' sense.
RECYCLED = {child.EXIT_RECYCLED: None, child.EXIT_MEMORY: StopReason.MEMORY}


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


def resident_memory(workers: Iterable[WorkerProcess]) -> list[int]:
    """Each live worker's resident set size, in bytes."""
    found = []
    for worker in workers:
        with contextlib.suppress(psutil.Error):
            found.append(psutil.Process(worker.pid).memory_info().rss)
    return found


def describe_exit(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    return f"exit code {code}" if code >= 0 else f"signal {signal.Signals(-code).name}"


class Pool:
    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.config = shared.config
        self.target = shared.config.workers
        self.children: dict[int, WorkerProcess] = {}
        # Mapped before any fork, so every process shares it.
        self.fences = FenceTable(FENCE_SLOTS)
        self.generation = 0
        self.startup_failures = 0
        self.fork_failures = 0  # in a row: spawning backs off
        self.next_spawn_at = 0.0

    def active_count(self) -> int:
        return sum(1 for w in self.children.values() if not w.retiring and w.stop_reason is None)

    def held(self) -> dict[int, tuple[int, str]]:
        """Every attempt the master still vouches for: job id -> (pid, token)."""
        return {
            lease.claim.id: (w.pid, lease.claim.token)
            for w in self.children.values()
            for lease in w.leases()
        }

    def stop_point(self, lease: Lease) -> float:
        config = self.config
        return lease_clock.stop_point(lease.expires, config.safety_margin, config.kill_grace)

    def next_due(self, running: bool) -> float:
        """The next moment a worker must be stopped, killed or spawned."""
        times = [float("inf")]
        for worker in self.children.values():
            if worker.kill_at is not None and not worker.killed:
                times.append(worker.kill_at)
            if worker.stop_reason is not None:
                continue
            times.extend(deadline for deadline, _ in worker.stopping.values())
            for lease in worker.running.values():
                if lease.claim.id in worker.stopping:
                    continue
                times.append(self.stop_point(lease))
                if self.config.job_timeout:
                    times.append(lease.started + self.config.job_timeout)
        if running and self.active_count() < self.target:
            times.append(self.next_spawn_at)
        return min(times)

    # -- keeping its size ------------------------------------------------------------------

    def manage(self, now: float, patient: bool) -> None:
        """Spawn, retire or replace one worker if the pool needs it (`patient`: new workers
        wait out a database outage, as the database answered before)."""
        active = self.active_count()
        if active < self.target:
            if now >= self.next_spawn_at:
                self.spawn(patient)
        elif active > self.target:
            self.retire(self.pick_to_retire(), "pool size")
        else:
            self.rotate()

    def pick_to_retire(self) -> WorkerProcess:
        """An idle child if there is one, else the youngest: the least work is lost."""
        candidates = [w for w in self.children.values() if not w.retiring and not w.stop_reason]
        return min(candidates, key=lambda w: (w.busy, -w.spawned))

    def retire(self, worker: WorkerProcess, why: str) -> None:
        if worker.retiring:
            return
        log.info("Retiring worker %d (%s)", worker.pid, why, extra={"event": "retiring"})
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

    def flush(self) -> bool:
        """Send on what the workers' sockets did not take at once; whether some still waits."""
        waiting = False
        for worker in self.children.values():
            if worker.process.outbox.waiting:
                self.send(worker, None)
                waiting |= bool(worker.process.outbox.waiting)
        return waiting

    def rotate(self) -> None:
        """After HUP: replace children of older generations one at a time, oldest first."""
        if any(w.retiring or not w.ready for w in self.children.values()):
            return
        outdated = [w for w in self.children.values() if w.generation < self.generation]
        if outdated:
            self.retire(min(outdated, key=lambda w: w.spawned), "reload")

    def spawn(self, patient: bool) -> None:
        # Chosen here, before the fork: the master knows whose rows to settle even if the
        # child dies before its first message.
        worker_id = new_worker_id()
        settings = dataclasses.replace(
            self.config.worker_settings(self.config.pool_specs()[0]),
            patient=patient,
            worker_id=worker_id,
        )
        slots = self.fences.allocate_many(settings.concurrency)
        if slots is None:
            log.error("Cannot run more than %d attempts at once", FENCE_SLOTS)
            self.next_spawn_at = time.monotonic() + MAX_SPAWN_BACKOFF
            return
        mark = SettlingMark()
        try:
            process = fork(
                lambda sock: child.run(kinds.worker_for(settings, sock, mark, slots)),
                self.shared.let_go,
            )
        except OSError as error:
            # EAGAIN under a pids limit: an outage, waited out; the running workers go on.
            for slot in slots:
                self.fences.release(slot)
            mark.close()
            self.fork_failures += 1
            backoff = min(MAX_SPAWN_BACKOFF, 0.1 * 2**self.fork_failures)
            self.next_spawn_at = time.monotonic() + backoff
            log.error(
                "Cannot start a worker: %s; trying again in %.1f s",
                error,
                backoff,
                extra={"event": "fork_failed"},
            )
            return
        self.fork_failures = 0
        worker = WorkerProcess(process, mark, slots, worker_id, self.generation, time.monotonic())
        self.children[process.pid] = worker
        self.shared.selector.register(process.sock, selectors.EVENT_READ, worker)
        log.info(
            "Spawned worker %d", process.pid, extra={"event": "spawned", "worker": process.pid}
        )

    def on_ready(self, worker: WorkerProcess) -> None:
        worker.ready = True
        self.startup_failures = 0
        log.info("Worker %d ready", worker.pid, extra={"event": "ready"})
        if worker.retiring:
            self.tell_drain(worker)

    # -- stopping --------------------------------------------------------------------------

    def fence(self, now: float) -> None:
        """Stop every worker whose lease cannot be renewed in time or whose job ran too long,
        and kill those whose kill grace ran out."""
        for worker in list(self.children.values()):
            for lease in list(worker.running.values()):
                if worker.stop_reason is not None:
                    break
                stopping = worker.stopping.get(lease.claim.id)
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

    def cancel(self, worker: WorkerProcess, lease: Lease, now: float) -> None:
        """Stop a worker whose job an operator cancelled, as any fence stops one: SIGTERM to
        its attempt's processes, SIGKILL at the kill grace. Once it is buried, its attempt is
        ended cancelled (the database refuses to settle it otherwise)."""
        stoppable = lease.claim.id in worker.running and lease.claim.id not in worker.stopping
        if stoppable and worker.stop_reason is None:
            self.stop_attempt(worker, lease, StopReason.CANCELLED, now)

    def stop_attempt(
        self, worker: WorkerProcess, lease: Lease, reason: StopReason, now: float
    ) -> None:
        """Stop an attempt a worker runs, saying why: the whole worker, with every attempt it
        runs (a thread cannot be stopped alone)."""
        claim = lease.claim
        if self.config.concurrency > 1:
            self.stop_alone(worker, lease, reason, now)
        else:
            self.stop(worker, reason, now, for_attempt=lease)
        level, text, event = STOPPING[reason]  # after the signals: a log write can block
        log.log(level, text, claim.id, worker.pid, extra=job_extra(claim, event))

    def stop_alone(
        self, worker: WorkerProcess, lease: Lease, reason: StopReason, now: float
    ) -> None:
        """Ask a concurrent worker to stop one attempt (a coroutine is cancelled), and kill the
        whole worker if it still runs after the kill grace, or at its lease's kill point if
        that comes first."""
        config = self.config
        deadline = lease_clock.kill_at(now, config.kill_grace, lease.expires, config.safety_margin)
        if deadline <= now:
            self.stop(worker, reason, now, at_once=True, for_attempt=lease)
            return
        worker.stopping[lease.claim.id] = (deadline, reason)
        self.send(worker, protocol.Stop(lease.claim.id, self.stop_cause(reason)))

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
        for_attempt: Lease | None = None,
    ) -> None:
        """SIGTERM to its whole attempt now, and SIGKILL after the kill grace, or at the
        lease's kill point if that comes first.

        It is told to drain too: a job whose own SIGTERM handler ends its attempt leaves a
        worker that claims nothing more and exits. The stop belongs to that attempt: once it
        ended, the SIGKILL is called off (see WorkerProcess.ended), so that it cannot hit
        the next job the worker may have claimed with its acknowledgement. A shutdown's stop
        is the whole worker's, and stays."""
        worker.stop_reason = reason
        worker.stopped = None if reason is StopReason.SHUTDOWN else for_attempt or worker.earliest
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
        self.shared.metrics.killed.labels(reason).inc()  # after the signal, which is urgent

    def stop_all(self, now: float) -> None:
        for worker in self.children.values():
            if worker.stop_reason is None:
                self.stop(worker, StopReason.SHUTDOWN, now)

    # -- burying ---------------------------------------------------------------------------

    def bury(self, worker: WorkerProcess, running: bool) -> tuple[str, bool]:
        """Reap an exited worker whose messages were read, after killing what is left of its
        attempt: how it exited, and whether its attempt's processes are confirmed gone."""
        gone = worker.end_attempt()
        if worker.stop_reason is None and worker.fenced_by_keeper():
            # The master could not vouch for its lease in time, and was late to say so.
            worker.stop_reason = StopReason.SELF_FENCE
            self.shared.metrics.killed.labels(StopReason.SELF_FENCE).inc()
        for slot in worker.slots:
            self.fences.release(slot)
        status = os.waitpid(worker.pid, 0)[1]
        worker.process.close()
        worker.mark.close()
        how = describe_exit(status)
        log.info(
            "Worker %d exited (%s)",
            worker.pid,
            how,
            extra={"event": "worker_exited", "worker": worker.pid, "exit": how},
        )
        self.count_exit(worker, os.waitstatus_to_exitcode(status), running)
        return how, gone

    def count_exit(self, worker: WorkerProcess, code: int, running: bool) -> None:
        if code in RECYCLED:
            reason = RECYCLED[code]
            if reason is not None:
                self.shared.metrics.killed.labels(reason).inc()
        elif running and not worker.retiring and worker.stop_reason is None:
            # Died on its own (a crash, or it could not start); the master's own kills are
            # counted by reason in jobq_workers_killed_total.
            self.shared.metrics.restarts.inc()

    def crash_looping(self, worker: WorkerProcess, how: str, running: bool) -> bool:
        """Count a worker that exited before it was ready, and back off spawning; whether
        the pool should stop: too many did in a row."""
        if worker.ready or worker.stop_reason is not None:
            return False
        self.startup_failures += 1
        looping = self.startup_failures >= CRASH_LOOP_LIMIT and running
        if looping:
            log.error(
                "Workers keep exiting before they are ready (%d in a row, the last with %s):"
                " stopping. The workers' log above says why; check the DSN and --app.",
                self.startup_failures,
                how,
                extra={"event": "crash_loop"},
            )
        backoff = min(MAX_SPAWN_BACKOFF, 0.1 * 2**self.startup_failures)
        self.next_spawn_at = time.monotonic() + backoff
        return looping
