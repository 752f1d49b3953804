"""The soak's faults, one at a time, kinds at random (a first round takes every kind once).

- kill_worker: SIGKILL of a busy worker.
- kill_master: SIGKILL of a master, with a replacement supervisor started.
- stop_master: SIGSTOP of a master, SIGCONT seconds later.
- kill_helper: SIGKILL of a master's renewer, housekeeper or fence keeper; it must be back
  within seconds.
- stall_log: a master's log pipe filled and not read for seconds (a stalled `| tee`):
  renewal and fencing must go on.
- cancel: an operator's cancel of a running job.
- overrun: a job that runs past --job-timeout, of any kind, enqueued to be run once.
- blackhole, slow: the database link (every supervisor reaches PostgreSQL through a TCP
  proxy) blackholed, or slowed past the renewal timeout or within it.
- db_restart: the database server restarted.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import jobq
from tests.support.apps.chaos_app import (
    Chaos,
    ChaosAsync,
    ChaosSubprocess,
    ChaosSubprocessAsync,
    ChaosToThread,
)

from .observe import busy_workers, helpers_of
from .plan import LEASE, OVERRUN

# The kinds an overrun job may be: each is stopped its own way.
OVERRUNS: tuple[type[Chaos], ...] = (
    Chaos,
    ChaosAsync,
    ChaosToThread,
    ChaosSubprocess,
    ChaosSubprocessAsync,
)

if TYPE_CHECKING:
    from .soak import Running, Soak

KINDS = (
    "kill_worker",
    "kill_master",
    "stop_master",
    "kill_helper",
    "stall_log",
    "cancel",
    "overrun",
    "blackhole",
    "slow",
    "db_restart",
)
WEIGHTS = (30, 8, 12, 15, 8, 8, 4, 10, 10, 7)
# An overrun job is run once: its attempt's timeout ends it.
ONCE = jobq.RetryPolicy(max_attempts=1)
# How long a killed helper may take to be back before the soak calls it a problem.
HELPER_BACK = 15.0


class Faults:
    def __init__(self, soak: Soak) -> None:
        self.soak = soak
        self.rng = soak.rng

    def inject(self) -> None:
        """Faults until the fault phase ends, with random gaps between them."""
        soak = self.soak
        first_round = list(KINDS)
        self.rng.shuffle(first_round)
        while time.monotonic() < soak.faults_end:
            soak.check_supervisors()
            kind = first_round.pop() if first_round else self.rng.choices(KINDS, WEIGHTS)[0]
            fault: Callable[[], str | None] = getattr(self, kind)
            began = soak.elapsed()
            what = fault()
            if what is not None:
                soak.faults[kind] += 1
                soak.say(f"{kind}: {what}", began)
            self.pause(self.rng.uniform(0.5, 2.5))
        soak.check_supervisors()

    def pause(self, seconds: float) -> None:
        """How long a fault lasts, or the gap between two: not a wait for anything."""
        time.sleep(max(0.0, min(seconds, self.soak.faults_end + LEASE - time.monotonic())))

    def awake(self) -> list[Running]:
        return [running for running in self.soak.live() if not running.stopped]

    # -- processes -------------------------------------------------------------------------

    def kill_worker(self) -> str | None:
        candidates = [
            (running, pid, job)
            for running in self.awake()
            for pid, job in busy_workers(running.supervisor.pid).items()
        ]
        if not candidates:
            return None
        running, pid, job = self.rng.choice(candidates)
        if not self.soak.deaths.kill(pid):
            return None
        return f"worker {pid} of {running.name}, holding job {job}"

    def kill_master(self) -> str | None:
        soak = self.soak
        running = self.rng.choice(soak.live())
        soak.deaths.refresh()  # its newest children too, before they die with it
        running.supervisor.signal(signal.SIGKILL)
        running.killed = True
        replacement = soak.start_supervisor()
        return f"{running.name} (pid {running.supervisor.pid}), replaced by {replacement.name}"

    def stop_master(self) -> str | None:
        running = self.rng.choice(self.soak.live())
        seconds = self.rng.uniform(1.0, 8.0)

        def stop(stopped: bool) -> None:
            running.supervisor.signal(signal.SIGSTOP if stopped else signal.SIGCONT)
            running.stopped = stopped

        self.lasting(seconds, partial(stop, True), partial(stop, False))
        return f"{running.name} stopped for {seconds:.1f} s"

    def kill_helper(self) -> str | None:
        """SIGKILL one helper, and see another in its place: a problem if it is not."""
        candidates = [
            (running, helper, pid)
            for running in self.awake()
            for helper, pid in helpers_of(running.supervisor.pid).items()
        ]
        if not candidates:
            return None
        running, helper, pid = self.rng.choice(candidates)
        if not self.soak.deaths.kill(pid):
            return None
        deadline = time.monotonic() + HELPER_BACK
        while helpers_of(running.supervisor.pid).get(helper) in (None, pid):
            if time.monotonic() > deadline or running.killed:
                if not running.killed:
                    self.soak.problem(f"the {helper} of {running.name} was not back in time")
                break
            time.sleep(0.1)
        return f"the {helper} (pid {pid}) of {running.name}"

    def cancel(self) -> str | None:
        candidates = [
            (running, job)
            for running in self.awake()
            for job in busy_workers(running.supervisor.pid).values()
        ]
        if not candidates:
            return None
        running, job = self.rng.choice(candidates)
        if not self.soak.observer.read(lambda queue: queue.cancel(job)):
            return None
        return f"job {job}, running under {running.name}"

    def overrun(self) -> str | None:
        kind = self.rng.choice(OVERRUNS)
        job = kind(OVERRUN, str(self.soak.journal))
        job_id = self.soak.observer.read(lambda queue: queue.enqueue(job, retry=ONCE))
        if job_id is None:
            return None
        return f"job {job_id}, a {kind.__name__} of {OVERRUN:g} s past --job-timeout"

    def stall_log(self) -> str | None:
        supervisor = self.rng.choice(self.awake() or self.soak.live()).supervisor
        seconds = self.rng.uniform(1.0, 8.0)
        self.lasting(seconds, supervisor.stall_log, supervisor.resume_log)
        return f"the log of master {supervisor.pid} stalled for {seconds:.1f} s"

    # -- the database ----------------------------------------------------------------------

    def blackhole(self) -> str | None:
        seconds = self.rng.uniform(1.0, 7.0)
        self.lasting(seconds, self.soak.proxy.blackhole, self.soak.proxy.restore)
        return f"database link blackholed for {seconds:.1f} s"

    def slow(self) -> str | None:
        # 1.5 s each way is past the 1 s renewal timeout; 0.3 s is slow but in time.
        latency = self.rng.choice([300, 1500])
        seconds = self.rng.uniform(2.0, 6.0)
        self.lasting(seconds, partial(self.soak.proxy.delay, latency), self.soak.proxy.restore)
        return f"database link slowed by {latency} ms each way for {seconds:.1f} s"

    def db_restart(self) -> str | None:
        down = self.rng.uniform(0.0, 2.0)
        self.lasting(down, self.soak.server.stop, self.soak.server.start)
        return f"PostgreSQL restarted, down {down:.1f} s"

    def lasting(self, seconds: float, begin: Callable[[], None], end: Callable[[], None]) -> None:
        """A fault that lasts: begun, then ended `seconds` later, whatever happens."""
        begin()
        try:
            self.pause(seconds)
        finally:
            end()
