"""The master's helper processes: the renewer, the housekeeper and the fence keeper.

Each is forked once at start, forked again when it dies (with backoff when it cannot be:
see Outage), and stopped last, after the workers: the housekeeper to fail the attempts it
was sent, the keeper to kill what is left of any attempt. The housekeeper's reports
(maintenance, queue depth, failed attempts) are read here; the renewer's answers go to the
master, which applies them to its workers. While one is missing, /healthz fails.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import selectors
import signal
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

from .. import protocol, wire
from ..queue.retention import Retention
from ..worker.fence import FenceTable
from . import housekeeper, keeper, renewer
from .forking import Forked, fork
from .horizon import HorizonWatch
from .shared import Shared
from .states import Helper

log = logging.getLogger("jobq")

# How long a stopping master waits for the housekeeper to record its last failures.
HOUSEKEEPER_GRACE = 10.0
# A replacement that cannot start (its fork fails, or it dies within STEADY of its start)
# is tried again after FIRST_RETRY, doubled on each failure up to MAX_RETRY: an outage is
# waited out, never retried in a tight loop. A helper that lived STEADY starts afresh.
FIRST_RETRY = 0.1
MAX_RETRY = 10.0
STEADY = 10.0
# The housekeeper's work the master keeps until it says Done: sent again to the next one.
KEPT_UNTIL_DONE = (protocol.FailAttempt, protocol.LeftBehind)


@dataclass
class Outage:
    """A helper that is not running (or not for long yet): why, and when it is tried again."""

    why: str
    failures: int = 0  # starts in a row that failed, or died before STEADY
    next_try: float = 0.0


class Helpers:
    def __init__(self, shared: Shared, fences: FenceTable) -> None:
        self.shared = shared
        self.fences = fences
        self.processes: dict[Helper, Forked] = {}
        self.started_at: dict[Helper, float] = {}
        self.outages: dict[Helper, Outage] = {}
        # Messages for a helper that is not running (or whose socket took no more): they go
        # to its replacement, in order. A renewal round waits there too (the latest only).
        self.held: dict[Helper, list[protocol.Message]] = {helper: [] for helper in Helper}
        # What the housekeeper was sent and has not said Done to, oldest first.
        self.unsettled: list[protocol.Message] = []
        # Replaced helpers finishing what they were sent before they exit; reaped quietly.
        self.retiring: list[Forked] = []
        self.database_problem: str | None = "not checked yet"
        self.database_seen = False  # it answered once: later failures are outages
        self.horizon = HorizonWatch(shared.metrics, shared.config.horizon_warning)
        # Called when the housekeeper's queue-depth figures arrive (the endpoint's release).
        self.depth_read: Callable[[], None] = lambda: None
        # Called with the housekeeper's answer to MeasureWork (see emptying.py).
        self.work_measured: Callable[[bool], None] = lambda left: None

    def body(self, helper: Helper) -> Callable[[socket.socket], int]:
        config = self.shared.config
        if helper is Helper.RENEWER:
            return partial(renewer.serve, config.dsn, config.lease, config.renew_timeout)
        if helper is Helper.HOUSEKEEPER:
            interval, metrics = config.maintenance_interval, config.metrics_port is not None
            return partial(
                housekeeper.serve,
                config.dsn,
                config.lease,
                interval,
                config.app,
                metrics,
                Retention(config.retain_completed, config.retain_failed),
            )
        # A replacement keeper reads the same table: the fences are the table's, not its.
        return partial(keeper.serve, self.fences, config.safety_margin, os.getpid())

    def start(self, helper: Helper) -> bool:
        """Fork the helper; whether it could be. A failed fork (EAGAIN under a pids limit)
        is an outage: it is retried with backoff, see tend()."""
        try:
            # The keeper outlives the master on purpose: it kills what the workers started.
            keeper_alive = helper is not Helper.KEEPER
            process = fork(self.body(helper), self.shared.let_go, dies_with_master=keeper_alive)
        except OSError as error:
            self.missing(helper, f"it could not be started: {error}", failed=True)
            self.shared.metrics.helper_restarts.labels(helper.event, "fork_failed").inc()
            return False
        self.processes[helper] = process
        self.started_at[helper] = time.monotonic()
        if helper is not Helper.KEEPER:  # it sends the master nothing
            self.shared.selector.register(process.sock, selectors.EVENT_READ, None)
        if helper is Helper.HOUSEKEEPER:  # what the last one did not finish, first
            self.held[helper][:0], self.unsettled = self.unsettled, []
        outage = self.outages.get(helper)
        if outage is not None:
            log.warning(
                "The %s runs again, after %d failed start(s)",
                helper,
                outage.failures,
                extra={"event": f"{helper.event}_back"},
            )
            outage.next_try = float("inf")  # kept for its failure count, until STEADY
        self.shared.metrics.helpers_up.labels(helper.event).set(1)
        self.deliver(helper)
        self.show_renewal()
        return True

    def missing(self, helper: Helper, why: str, failed: bool) -> None:
        """Record that a helper is not running, and when its next start is due."""
        now = time.monotonic()
        outage = self.outages.get(helper)
        if outage is None:
            outage = self.outages[helper] = Outage(why)
        outage.why = why
        if failed:
            outage.failures += 1
        delay = 0.0 if not outage.failures else FIRST_RETRY * 2 ** (outage.failures - 1)
        outage.next_try = now + min(MAX_RETRY, delay)
        self.shared.metrics.helpers_up.labels(helper.event).set(0)
        self.show_renewal()
        log.error(
            "The %s is not running: %s; next start in %.1f s",
            helper,
            why,
            outage.next_try - now,
            extra={"event": helper.event},
        )

    def show_renewal(self) -> None:
        """Workers claim nothing while no renewer runs: a job claimed then would be fenced."""
        self.fences.pause_claims(Helper.RENEWER not in self.processes)

    def tend(self, now: float) -> None:
        """Start the helpers whose retry is due; send what waits for the running ones."""
        for helper, outage in list(self.outages.items()):
            if helper in self.processes:
                if now - self.started_at[helper] >= STEADY:
                    del self.outages[helper]  # it lived: the next failure starts afresh
            elif now >= outage.next_try:
                self.start(helper)
        for helper in self.processes:
            if self.held[helper]:
                self.deliver(helper)

    def due(self) -> float:
        """When the next helper's start is due."""
        waiting = [o.next_try for h, o in self.outages.items() if h not in self.processes]
        return min(waiting, default=float("inf"))

    def problems(self) -> list[str]:
        """Each helper not running, and why: /healthz fails on them."""
        return [
            f"the {helper} is not running: {outage.why}"
            for helper, outage in self.outages.items()
            if helper not in self.processes
        ]

    def replace(self, helper: Helper) -> None:
        """Kill a helper and start another; the master's reaper collects the old one."""
        process = self.processes.pop(helper, None)
        if process is not None:
            with contextlib.suppress(KeyError):
                self.shared.selector.unregister(process.sock)
            process.signal(signal.SIGKILL)
            process.close()
            self.shared.metrics.helper_restarts.labels(helper.event, "unresponsive").inc()
        self.missing(helper, "it did not answer in time", failed=False)
        self.tend(time.monotonic())

    def refresh(self, helper: Helper) -> None:
        """Start a fresh helper, and let the old one finish what it was sent, then exit:
        after a reload, the housekeeper imports the new code, schedules included."""
        process = self.processes.pop(helper, None)
        if process is not None:
            with contextlib.suppress(KeyError):
                # What it still reports is only metrics: not worth two housekeepers' messages.
                self.shared.selector.unregister(process.sock)
            self.send(process, protocol.Drain())
            self.retiring.append(process)
            self.unsettled = []  # it finishes them before it drains
        self.start(helper)

    def reaped(self, pid: int, how: str) -> Helper | None:
        """If `pid`, reaped, was a helper, start another; which helper it was."""
        for process in self.retiring:
            if process.pid == pid:
                self.retiring.remove(process)
                process.close()
                return None
        found = [helper for helper, process in self.processes.items() if process.pid == pid]
        if not found:
            return None
        helper = found[0]
        process = self.processes.pop(helper)
        with contextlib.suppress(KeyError):
            self.shared.selector.unregister(process.sock)
        process.close()
        self.shared.metrics.helper_restarts.labels(helper.event, "exited").inc()
        # Still in its outage: the replacement died before it was STEADY, and backs off.
        self.missing(helper, f"it exited ({how})", failed=helper in self.outages)
        self.tend(time.monotonic())
        return helper

    def stop(self) -> None:
        """Let the housekeeper fail what it was sent (within 10 s), and the keeper kill what
        is left of any attempt, then stop every helper."""
        housekeeping = self.processes.get(Helper.HOUSEKEEPER)
        if housekeeping is not None:
            self.send(housekeeping, protocol.Drain())
            # A pidfd turns readable when its process exits.
            select.select([housekeeping.pidfd], [], [], HOUSEKEEPER_GRACE)
        keeping = self.processes.get(Helper.KEEPER)
        if keeping is not None:
            keeping.sock.close()  # its cue: it kills every attempt still held, and exits
            select.select([keeping.pidfd], [], [], HOUSEKEEPER_GRACE)
        retiring, self.retiring = self.retiring, []
        for process in [*retiring, *(self.processes.pop(h, None) for h in Helper)]:
            if process is not None:
                process.signal(signal.SIGKILL)
                os.waitpid(process.pid, 0)
                process.close()

    # -- messages --------------------------------------------------------------------------

    def send(self, process: Forked, message: protocol.Message) -> bool:
        """Whether the message went, or waits in the process's outbox for its socket to take
        it (a dead helper's socket takes none: the reaper starts another, which gets what
        is held for it)."""
        try:
            process.outbox.put(message)
        except OSError:
            return False
        return True

    def tell(self, helper: Helper, message: protocol.Message) -> None:
        """Send a helper a message; one that is not running, or being replaced, gets it
        once its replacement runs. Of renewal rounds only the latest is kept: it renews
        everything the others would have."""
        held = self.held[helper]
        if isinstance(message, protocol.Renew):
            held[:] = [m for m in held if not isinstance(m, protocol.Renew)]
        held.append(message)
        if helper in self.processes:
            self.deliver(helper)

    def deliver(self, helper: Helper) -> None:
        process, held = self.processes[helper], self.held[helper]
        while held and self.send(process, held[0]):
            sent = held.pop(0)
            if isinstance(sent, KEPT_UNTIL_DONE):
                self.unsettled.append(sent)

    def flush(self) -> bool:
        """Send on what the helpers' sockets did not take at once; whether some still waits."""
        waiting = False
        for process in self.processes.values():
            if process.outbox.waiting:
                with contextlib.suppress(OSError):  # it died: the reaper starts another
                    process.outbox.flush()
                waiting |= bool(process.outbox.waiting)
        return waiting

    def renewals(self) -> Iterator[protocol.Renewed]:
        """The renewer's answers that came in."""
        process = self.processes.get(Helper.RENEWER)
        if process is None:
            return
        with contextlib.suppress(EOFError):  # it died: the reaper starts another
            for result in wire.waiting(process.sock):
                assert isinstance(result, protocol.Renewed)
                yield result

    def read_housekeeper(self) -> None:
        process = self.processes.get(Helper.HOUSEKEEPER)
        if process is None:
            return
        with contextlib.suppress(EOFError):  # it died: the reaper starts another
            for message in wire.waiting(process.sock):
                if isinstance(message, protocol.Done):
                    self.unsettled.pop(0)
                else:
                    self.on_housekeeping(message)

    def saw_database(self, problem: str | None) -> None:
        """What the last of the helpers' database work found (None: it worked), for /readyz:
        whichever helper reached the database last, so a failover's end shows as soon as
        the renewer or the housekeeper works on the new primary."""
        self.database_problem = problem
        self.database_seen |= problem is None

    def on_housekeeping(self, message: protocol.Message) -> None:
        metrics = self.shared.metrics
        if isinstance(message, protocol.Maintained):
            self.saw_database(message.error)
            if message.counts is not None:
                metrics.on_maintained(message.counts)
        elif isinstance(message, protocol.HorizonRead):
            self.horizon.saw(message)
        elif isinstance(message, protocol.WorkLeft):
            self.work_measured(message.left)
        elif isinstance(message, protocol.Pruned):
            metrics.on_pruned(message.deleted, message.seconds, message.oldest)
        elif isinstance(message, protocol.Depth):
            metrics.on_depth(
                message.counts, message.oldest, time.monotonic(), message.paused, message.limits
            )
            self.depth_read()
        elif isinstance(message, protocol.Settled):
            metrics.failed.labels(message.type, message.outcome).inc()
        elif isinstance(message, protocol.Released):
            for job_type in message.types:
                metrics.on_released(job_type)
        elif isinstance(message, protocol.Scheduled):
            metrics.on_scheduled(message.slots, message.declared)
