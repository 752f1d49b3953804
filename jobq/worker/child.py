"""A worker child's life: claim one job at a time, report it, run it, acknowledge, report.

The master renews the lease; this process only has to tell it what it holds, and to die
when the master cannot vouch for the lease any more (see fence.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import threading
import time

import psutil

from .. import protocol
from ..queue import Queue
from ..records import ClaimedJob, Outcome
from . import title
from .fence import SelfFence
from .settings import WorkerSettings

log = logging.getLogger("jobq")

# Exit codes the master reads.
EXIT_OK = 0
EXIT_CANNOT_START = 3
EXIT_RECYCLED = 4  # --max-jobs-per-child reached
EXIT_MEMORY = 5  # --max-memory-per-child passed

# An idle child polls quickly right after work dried up, then backs off to poll_interval.
FIRST_IDLE_WAIT = 0.05
# How often a child blocked on LISTEN/NOTIFY checks whether it was told to drain.
DRAIN_CHECK = 0.25


class Child:
    def __init__(self, settings: WorkerSettings, sock: socket.socket) -> None:
        self.settings = settings
        self.sock = sock
        self.stopping = threading.Event()
        self.fence = SelfFence(settings.safety_margin)
        # The claim being run, shared with the thread that re-arms the fence.
        self.lock = threading.Lock()
        self.current: ClaimedJob | None = None
        self.started = 0.0

    def main(self) -> int:
        title.starting()
        queue: Queue | None = None
        try:
            queue = Queue.connect(self.settings.dsn, lease_duration=self.settings.lease)
            notifying = queue.backend.listen()
            # A first claim before saying ready: a connection that works but cannot claim
            # (no schema, no permission) is a worker that cannot start, and the master
            # counts it towards a crash loop instead of respawning it forever at full speed.
            first = queue.claim(self.settings.types)
        except Exception as error:
            log.error("Worker cannot start: %s", error, extra={"event": "worker_failed"})
            if queue is not None:
                with contextlib.suppress(Exception):
                    queue.close()
            return EXIT_CANNOT_START
        protocol.send(self.sock, protocol.Ready(os.getpid()))
        title.idle()
        threading.Thread(target=self.follow_master, name="master", daemon=True).start()
        try:
            return self.work(queue, notifying, first)
        finally:
            queue.close()

    def work(self, queue: Queue, notifying: bool, first: ClaimedJob | None) -> int:
        """Run jobs until drained (EXIT_OK) or recycled (EXIT_RECYCLED, EXIT_MEMORY)."""
        done = 0
        wait = FIRST_IDLE_WAIT
        claim = first
        while True:
            # A claim already made runs even if a drain came meanwhile: it holds a lease.
            if claim is None:
                if self.stopping.is_set():
                    return EXIT_OK
                claim = queue.claim(self.settings.types)
            if claim is None:
                if notifying:
                    self.wait_for_jobs(queue)
                else:
                    self.stopping.wait(wait)
                    wait = min(wait * 2, self.settings.poll_interval)
                continue
            wait = FIRST_IDLE_WAIT
            self.begin(claim)
            try:
                outcome = queue.run(claim)
            except BaseException:
                # handle() raised SystemExit or the like: its attempt is failed; honour it.
                self.end(claim, Outcome.FAILED)
                raise
            self.end(claim, outcome)
            claim = None
            done += 1
            recycled = self.recycle_code(done)
            if recycled is not None:
                return recycled

    def wait_for_jobs(self, queue: Queue) -> None:
        """Wait for a wake-up up to poll_interval, in short slices: a drain (TERM, HUP,
        TTOU) must not wait behind a long --poll-interval, and the wake-up needs no query."""
        deadline = time.monotonic() + self.settings.poll_interval
        while not self.stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or queue.backend.wait_for_jobs(min(remaining, DRAIN_CHECK)):
                return

    def begin(self, claim: ClaimedJob) -> None:
        with self.lock:
            self.current, self.started = claim, time.monotonic()
            self.fence.arm(claim.expires_monotonic)
        # Before decoding or running anything: from here on the master renews this lease.
        protocol.send(self.sock, protocol.Claimed.of(claim))
        title.busy(claim, self.started)

    def end(self, claim: ClaimedJob, outcome: Outcome) -> None:
        with self.lock:
            self.fence.disarm()
            self.current = None
        protocol.send(self.sock, protocol.Finished(claim.id, str(outcome)))
        title.idle()

    def recycle_code(self, done: int) -> int | None:
        """The exit code to recycle with, between jobs, or None to go on."""
        limit = self.settings.max_jobs
        if limit and done >= limit:
            log.info("Recycling worker after %d jobs", done, extra={"event": "recycle"})
            return EXIT_RECYCLED
        ceiling = self.settings.max_memory_mib
        if ceiling:
            rss = psutil.Process().memory_info().rss / 2**20
            if rss > ceiling:
                log.info(
                    "Recycling worker: RSS %.0f MiB is over %.0f MiB",
                    rss,
                    ceiling,
                    extra={"event": "recycle"},
                )
                return EXIT_MEMORY
        return None

    def follow_master(self) -> None:
        """Apply the master's messages; refresh the title's running time meanwhile."""
        while True:
            readable, _, _ = select.select([self.sock], [], [], 1.0)
            if not readable:
                with self.lock:
                    if self.current is not None:
                        title.busy(self.current, self.started)
                continue
            message = protocol.receive(self.sock)
            if message is None or isinstance(message, protocol.Drain):
                # A master that closed our socket is gone or going: finish up and leave.
                self.stopping.set()
                if message is None:
                    return
            elif isinstance(message, protocol.Extended):
                with self.lock:
                    if self.current is not None and self.current.id == message.id:
                        self.fence.arm(message.expires_monotonic)


def run(settings: WorkerSettings, sock: socket.socket) -> int:
    """The child's whole life after fork; returns its exit code."""
    sock.setblocking(True)
    try:
        return Child(settings, sock).main()
    except SystemExit as exit:
        log.warning("A job raised SystemExit(%s); the worker exits", exit.code)
        return EXIT_OK
    except BaseException:
        log.exception("Worker crashed")
        return 1
