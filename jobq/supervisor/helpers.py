"""The master's helper processes: the renewer, the housekeeper and the fence keeper.

Each is forked once at start, forked again when it dies, and stopped last, after the
workers: the housekeeper to fail the attempts it was sent, the keeper to kill what is left
of any attempt. The housekeeper's reports (maintenance, queue depth, failed attempts) are
read here; the renewer's answers go to the master, which applies them to its workers.
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
from functools import partial

from .. import protocol
from ..worker.fence import FenceTable
from . import housekeeper, keeper, renewer
from .forking import Forked, fork
from .shared import Shared
from .states import Helper

log = logging.getLogger("jobq")

# How long a stopping master waits for the housekeeper to record its last failures.
HOUSEKEEPER_GRACE = 10.0


class Helpers:
    def __init__(self, shared: Shared, fences: FenceTable) -> None:
        self.shared = shared
        self.fences = fences
        self.processes: dict[Helper, Forked] = {}
        # Replaced helpers finishing what they were sent before they exit; reaped quietly.
        self.retiring: list[Forked] = []
        self.database_problem: str | None = "not checked yet"
        self.database_seen = False  # it answered once: later failures are outages
        # Called when the housekeeper's queue-depth figures arrive (the endpoint's release).
        self.depth_read: Callable[[], None] = lambda: None

    def start(self, helper: Helper) -> None:
        config = self.shared.config
        body: Callable[[socket.socket], int]
        if helper is Helper.RENEWER:
            body = partial(renewer.serve, config.dsn, config.lease, config.renew_timeout)
        elif helper is Helper.HOUSEKEEPER:
            interval, metrics = config.maintenance_interval, config.metrics_port is not None
            body = partial(
                housekeeper.serve, config.dsn, config.lease, interval, config.app, metrics
            )
        else:
            body = partial(keeper.serve, self.fences, config.safety_margin, os.getpid())
        # The keeper outlives the master on purpose: it kills what the workers started.
        process = fork(body, self.shared.let_go, dies_with_master=helper is not Helper.KEEPER)
        self.processes[helper] = process
        if helper is not Helper.KEEPER:  # it sends the master nothing
            self.shared.selector.register(process.sock, selectors.EVENT_READ, None)

    def replace(self, helper: Helper) -> None:
        """Kill a helper and start another; the master's reaper collects the old one."""
        process = self.processes.pop(helper, None)
        if process is not None:
            with contextlib.suppress(KeyError):
                self.shared.selector.unregister(process.sock)
            process.signal(signal.SIGKILL)
            process.close()
        self.start(helper)

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
        self.start(helper)

    def reaped(self, pid: int, how: str) -> Helper | None:
        """If `pid`, reaped, was a helper, start another; which helper it was."""
        for process in self.retiring:
            if process.pid == pid:
                self.retiring.remove(process)
                process.close()
                return None
        for helper, process in self.processes.items():
            if process.pid == pid:
                log.warning(
                    "The %s exited (%s): starting another",
                    helper,
                    how,
                    extra={"event": helper.event},
                )
                with contextlib.suppress(KeyError):
                    self.shared.selector.unregister(process.sock)
                process.close()
                self.start(helper)
                return helper
        return None

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

    def send(self, process: Forked, message: protocol.Message | None) -> bool:
        """Send a message, or (None) what waits of the earlier ones; whether that worked (or
        waits for the socket to take it). A failure is logged here: the other end is gone
        or going, and its reaping starts another; what else the loss means is the
        caller's to decide."""
        try:
            if message is None:
                process.outbox.flush()
            else:
                process.outbox.put(message)
        except OSError as error:
            what = "the rest of its messages" if message is None else f"a {message.kind} message"
            log.error(
                "Could not send process %d %s: %s",
                process.pid,
                what,
                error,
                extra={"event": "send_failed"},
            )
            return False
        return True

    def tell(self, helper: Helper, message: protocol.Message) -> bool:
        """Send a helper a message, if it runs; whether it was sent (or waits to be)."""
        process = self.processes.get(helper)
        return process is not None and self.send(process, message)

    def flush(self) -> bool:
        """Send on what the helpers' sockets did not take at once; whether some still waits."""
        waiting = False
        for process in self.processes.values():
            if process.outbox.waiting:
                self.send(process, None)
                waiting |= bool(process.outbox.waiting)
        return waiting

    def renewals(self) -> Iterator[protocol.Renewed]:
        """The renewer's answers that came in."""
        process = self.processes.get(Helper.RENEWER)
        if process is None:
            return
        with contextlib.suppress(EOFError):  # it died: the reaper starts another
            for result in protocol.waiting(process.sock):
                assert isinstance(result, protocol.Renewed)
                yield result

    def read_housekeeper(self) -> None:
        process = self.processes.get(Helper.HOUSEKEEPER)
        if process is None:
            return
        with contextlib.suppress(EOFError):  # it died: the reaper starts another
            for message in protocol.waiting(process.sock):
                self.on_housekeeping(message)

    def on_housekeeping(self, message: protocol.Message) -> None:
        metrics = self.shared.metrics
        if isinstance(message, protocol.Maintained):
            self.database_problem = message.error
            self.database_seen |= message.error is None
            if message.counts is not None:
                metrics.on_maintained(message.counts)
        elif isinstance(message, protocol.Depth):
            metrics.on_depth(message.counts, message.oldest, time.monotonic(), message.paused)
            self.depth_read()
        elif isinstance(message, protocol.Settled):
            metrics.failed.labels(message.type, message.outcome).inc()
        elif isinstance(message, protocol.Released):
            for job_type in message.types:
                metrics.on_released(job_type)
        elif isinstance(message, protocol.Scheduled):
            metrics.on_scheduled(message.slots, message.declared)
