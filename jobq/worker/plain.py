"""The single-process worker behind `jobq work`: maintenance, claim, run, poll when idle.

Like process_jobs, it runs maintenance before it looks for work; while busy, at most every
maintenance_interval, so a stream of jobs does not pay for it on every claim.

It never renews a lease, so a job must finish within one; jobq-supervise is the worker that
renews. A stop request (SIGTERM/SIGINT) lets the running job finish and then returns.

Between jobs it also enqueues the due slots of the schedules the application declared
(scheduler.py makes each slot run once, whatever else enqueues them).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Sequence
from types import FrameType

from ..queue import Queue
from ..queue.running import new_worker_id, work_as, worker_id
from ..schedules import Periodic

log = logging.getLogger("jobq")


class PlainWorker:
    def __init__(
        self,
        queue: Queue,
        types: Sequence[str],
        poll_interval: float = 1.0,
        maintenance_interval: float = 30.0,
        max_jobs: int | None = None,
        schedules: Sequence[Periodic] = (),
    ) -> None:
        self.queue = queue
        self.types = tuple(types)
        self.poll_interval = poll_interval
        self.maintenance_interval = maintenance_interval
        self.max_jobs = max_jobs
        self.schedules = tuple(schedules)
        self.next_schedule = time.monotonic() if schedules else float("inf")
        self.stopping = threading.Event()

    def install_signal_handlers(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self.request_stop)

    def request_stop(self, signum: int, frame: FrameType | None) -> None:
        if self.stopping.is_set():
            # A second request means now: the running job's attempt is failed as interrupted.
            raise KeyboardInterrupt
        log.info("Stopping after the current job (%s)", signal.Signals(signum).name)
        self.stopping.set()

    def run(self) -> int:
        """Work until asked to stop (or max_jobs attempts ran); returns attempts run."""
        # A fresh id for this run's claims: each `jobq work` is its own worker incarnation.
        work_as(new_worker_id())
        log.info("Worker %s started", worker_id(), extra={"event": "started"})
        ran = 0
        next_maintenance = 0.0
        while not self.stopping.is_set() and (self.max_jobs is None or ran < self.max_jobs):
            if time.monotonic() >= next_maintenance:
                self.queue.run_maintenance()
                next_maintenance = time.monotonic() + self.maintenance_interval
                # A stop requested during maintenance must not start another job.
                if self.stopping.is_set():
                    break
            self.run_schedules()
            if self.queue.process_next(self.types):
                ran += 1
            else:
                self.stopping.wait(min(self.poll_interval, self.until_schedule()))
                # Idle, as process_jobs would: look for abandoned leases at every poll.
                next_maintenance = 0.0
        return ran

    def run_schedules(self) -> None:
        if time.monotonic() >= self.next_schedule:
            tick = self.queue.run_schedules(self.schedules)
            self.next_schedule = time.monotonic() + tick.wait()

    def until_schedule(self) -> float:
        return max(0.0, self.next_schedule - time.monotonic())
