"""A worker child's life: claim one job at a time, report it, run it, acknowledge, report.

The master renews the lease; this process only has to tell it what it holds, in a message and
in the fence table (see fence.py), and to end its job's leftover processes with each attempt.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import threading
import time
from dataclasses import dataclass
from typing import NoReturn

import psutil

from .. import hooks, protocol, schema
from ..app import start_worker
from ..errors import ConfigurationError, Unacknowledged
from ..queue import Queue
from ..records import ClaimedJob, Outcome
from . import attempt, title
from .fence import EMPTY, Hold, Slot, token_key
from .mark import SettlingMark
from .settings import WorkerSettings
from .settling import SettlingReporter

log = logging.getLogger("jobq")

# Exit codes the master reads.
EXIT_OK = 0
EXIT_CANNOT_START = 3
EXIT_RECYCLED = 4  # --max-jobs-per-child reached
EXIT_MEMORY = 5  # --max-memory-per-child passed

# An idle child polls quickly right after work dried up, then backs off to poll_interval.
FIRST_IDLE_WAIT = 0.05
# A worker that lost its database tries again after this, doubling up to the maximum.
FIRST_RECONNECT_WAIT = 0.5
MAX_RECONNECT_WAIT = 5.0
# What a worker reports when it could not record an attempt's outcome (see run_jobs).
UNACKNOWLEDGED = "unacknowledged"
# How often a child blocked on LISTEN/NOTIFY checks whether it was told to drain.
DRAIN_CHECK = 0.25
# How often the process title follows the running job.
TITLE_REFRESH = 0.5


@dataclass
class Session:
    """A worker's connection, whether it can be woken by the database, and the claim it made
    on connecting, if any."""

    queue: Queue
    notifying: bool
    first: ClaimedJob | None


def close_quietly(queue: Queue | None) -> None:
    if queue is not None:
        with contextlib.suppress(Exception):
            queue.close()


class DatabaseLost(Exception):
    """A database call failed in a way that leaves this worker without a usable connection."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class Child:
    def __init__(
        self, settings: WorkerSettings, sock: socket.socket, mark: SettlingMark, slot: Slot
    ) -> None:
        self.settings = settings
        self.sock = sock
        self.mark = mark
        self.slot = slot
        self.stopping = threading.Event()
        # The claim being run, shared with the thread that shows it in the process title.
        self.lock = threading.Lock()
        self.current: ClaimedJob | None = None
        self.idle_wait = FIRST_IDLE_WAIT
        self.reporter = SettlingReporter(mark)
        self.started = 0.0
        self.done = 0

    def main(self) -> int:
        title.starting()
        try:
            start_worker(self.settings.app)
        except Exception as error:
            # An application's own bug is worth its traceback; a missing module is not.
            trace = not isinstance(error, ConfigurationError)
            log.error(
                "Worker cannot start: %s", error, exc_info=trace, extra={"event": "worker_failed"}
            )
            return EXIT_CANNOT_START
        session = self.open_session(patient=self.settings.patient)
        if session is None:
            return EXIT_CANNOT_START
        protocol.send(self.sock, protocol.Ready(os.getpid()))
        title.state(None, 0.0)
        threading.Thread(target=self.follow_master, name="master", daemon=True).start()
        return self.work(session)

    def open_session(self, patient: bool) -> Session | None:
        """Connect and make a first claim; None if that cannot be done.

        The first claim comes before the worker says it is ready: a connection that works but
        cannot claim (no schema, no permission) is a worker that cannot start, which the master
        counts towards a crash loop. A patient worker (the database worked before: this is an
        outage, not a misconfiguration) keeps trying instead, until it is told to stop.
        """
        delay = FIRST_RECONNECT_WAIT
        while True:
            queue: Queue | None = None
            try:
                queue = Queue.connect(
                    self.settings.dsn,
                    lease_duration=self.settings.lease,
                    listener=self.reporter,
                    listen_dsn=self.settings.listen_dsn,
                )
                queue.hooks = hooks.for_jobs()
                notifying = queue._listen()
                return Session(queue, notifying, queue.claim(self.settings.types))
            except Exception as error:
                close_quietly(queue)
                # A schema dropped (or never created) names its fix.
                advice = schema.hint(self.settings.dsn, error)
                if not patient:
                    log.error(
                        "Worker cannot start: %s%s", error, advice, extra={"event": "worker_failed"}
                    )
                    return None
                log.warning(
                    "Database out of reach, trying again in %.1f s: %s%s",
                    delay,
                    error,
                    advice,
                    extra={"event": "db_wait"},
                )
            if self.stopping.wait(delay):
                return None
            delay = min(delay * 2, MAX_RECONNECT_WAIT)

    def work(self, session: Session) -> int:
        """Run jobs until drained (EXIT_OK) or recycled (EXIT_RECYCLED, EXIT_MEMORY)."""
        try:
            return self.run_jobs(session)
        finally:
            close_quietly(session.queue)

    def run_jobs(self, session: Session) -> int:
        claim = session.first
        while True:
            # A claim already made runs even if a drain came meanwhile: it holds a lease.
            if claim is None and self.stopping.is_set():
                return EXIT_OK
            try:
                if claim is None:
                    claim = self.next_claim(session)
                    continue
                claim = self.run_claim(session, claim)
            except DatabaseLost as lost:
                log.error("%s: %s", lost.what, lost.__cause__, extra={"event": "db_error"})
                if not self.reconnect(session):
                    return EXIT_OK
                claim = session.first
                continue
            self.done += 1
            # With a claim in hand, wants_another() already found no reason to recycle.
            recycle = None if claim is not None else self.recycle_due(self.done)
            if recycle is not None:
                code, why = recycle
                log.info("Recycling worker: %s", why, extra={"event": "recycle"})
                return code

    def wants_another(self) -> bool:
        """Asked when a job's code is done: claim the next job with its acknowledgement?
        Not when the worker is about to drain or to be recycled."""
        return not self.stopping.is_set() and self.recycle_due(self.done + 1) is None

    def next_claim(self, session: Session) -> ClaimedJob | None:
        """Claim a job, or wait a while (idle) and return None."""
        try:
            claim = session.queue.claim(self.settings.types)
            if claim is not None:
                self.idle_wait = FIRST_IDLE_WAIT
                return claim
            if session.notifying:
                self.wait_for_jobs(session.queue)
            else:
                self.stopping.wait(self.idle_wait)
                self.idle_wait = min(self.idle_wait * 2, self.settings.poll_interval)
        except Exception as error:
            raise DatabaseLost("Claim failed") from error
        return None

    def run_claim(self, session: Session, claim: ClaimedJob) -> ClaimedJob | None:
        """Run one attempt; returns the next claim when its acknowledgement made one."""
        self.begin(claim)
        try:
            outcome, next_claim = session.queue.run_and_claim(
                claim, self.settings.types, more=self.wants_another
            )
        except Unacknowledged as unacknowledged:
            outcome, next_claim = self.acknowledge_again(session, unacknowledged), None
        except Exception as error:
            self.unacknowledged(claim, error)
        except BaseException:
            # handle() raised SystemExit or the like: its attempt is failed; honour it.
            self.end(claim, self.reporter.outcome_of(claim))
            raise
        self.end(claim, outcome, next_claim)
        return next_claim

    def acknowledge_again(self, session: Session, unacknowledged: Unacknowledged) -> Outcome:
        """Record an outcome the session's connection could not, on a fresh connection, for
        as long as the attempt's lease is vouched for; the fresh connection then replaces the
        session's. After a database failover, the job need not run again in full."""
        claim, delay = unacknowledged.claim, FIRST_RECONNECT_WAIT
        error = unacknowledged.__cause__
        while (left := self.vouched_until(claim) - time.monotonic()) > 0:
            log.warning(
                "Could not record how attempt %d of job %d ended (%s): trying on a new connection",
                claim.attempt,
                claim.id,
                error,
                extra={"event": "ack_retry"},
            )
            queue: Queue | None = None
            try:
                queue = Queue.connect(
                    self.settings.dsn, lease_duration=self.settings.lease, listener=self.reporter
                )
                outcome = queue._acknowledge(unacknowledged)
                session.notifying = queue._listen()
            except Exception as failure:
                close_quietly(queue)
                error = failure
                time.sleep(min(delay, left))
                delay = min(delay * 2, MAX_RECONNECT_WAIT)
                continue
            close_quietly(session.queue)
            session.queue = queue
            return outcome
        self.unacknowledged(claim, error)

    def vouched_until(self, claim: ClaimedJob) -> float:
        """The end of the attempt's lease as this worker knows it (its claim, or the master's
        last extension of it in the fence table), less the safety margin."""
        expires = claim.expires_monotonic
        mine = Hold(os.getpid(), claim.id, token_key(claim.token), expires)
        extension = self.slot.master.read()
        if extension is not None and mine.same_attempt(extension):
            expires = max(expires, extension.expires)
        return expires - self.settings.safety_margin

    def unacknowledged(self, claim: ClaimedJob, error: BaseException | None) -> NoReturn:
        # The master stops renewing the attempt, its lease runs out, and maintenance gives the
        # job another one.
        self.end(claim, UNACKNOWLEDGED)
        raise DatabaseLost(
            f"Could not record how attempt {claim.attempt} of job {claim.id} ended, so "
            "the job will run again after its lease"
        ) from error

    def reconnect(self, session: Session) -> bool:
        """Replace a session whose connection failed; False if stopped while trying."""
        close_quietly(session.queue)
        fresh = self.open_session(patient=True)
        if fresh is None:
            return False
        session.queue, session.notifying, session.first = fresh.queue, fresh.notifying, fresh.first
        return True

    def wait_for_jobs(self, queue: Queue) -> None:
        """Wait for a wake-up up to poll_interval, in short slices: a drain (TERM, HUP,
        TTOU) must not wait behind a long --poll-interval, and the wake-up needs no query."""
        deadline = time.monotonic() + self.settings.poll_interval
        while not self.stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or queue._wait_for_jobs(min(remaining, DRAIN_CHECK)):
                return

    def begin(self, claim: ClaimedJob) -> None:
        if self.current is claim:
            return  # claimed with the last acknowledgement: end() reported it already
        self.hold(claim)
        # Before decoding or running anything: from here on the master renews this lease.
        protocol.send(self.sock, protocol.Claimed.of(claim))

    def end(self, claim: ClaimedJob, outcome: str, then: ClaimedJob | None = None) -> None:
        """Report an attempt's end, and the attempt its acknowledgement began, if any, in one
        message: the master swaps one lease for the other."""
        if then is None:
            self.slot.worker.write(EMPTY)
            with self.lock:
                self.current = None
            protocol.send(self.sock, protocol.Finished(claim.id, str(outcome)))
        else:
            self.hold(then)
            next_attempt = protocol.Claimed.of(then)
            protocol.send(self.sock, protocol.Finished(claim.id, str(outcome), next_attempt))
        # Only now: the master reads the mark after the messages, so it never sees the mark
        # cleared while it still believes the attempt is running.
        self.mark.clear()

    def hold(self, claim: ClaimedJob) -> None:
        """Make `claim` the one this process is fenced on, and marks what it starts with."""
        key = token_key(claim.token)
        self.slot.worker.write(Hold(os.getpid(), claim.id, key, claim.expires_monotonic))
        attempt.mark(claim.id)
        with self.lock:
            self.current, self.started = claim, time.monotonic()

    def recycle_due(self, done: int) -> tuple[int, str] | None:
        """(exit code, why) when the worker should be replaced after `done` jobs, else None."""
        limit = self.settings.max_jobs
        if limit and done >= limit:
            return EXIT_RECYCLED, f"{done} jobs done"
        ceiling = self.settings.max_memory_mib
        if ceiling:
            rss = psutil.Process().memory_info().rss / 2**20
            if rss > ceiling:
                return EXIT_MEMORY, f"RSS {rss:.0f} MiB is over {ceiling:.0f} MiB"
        return None

    def follow_master(self) -> None:
        """Apply the master's messages, and keep the process title up to date.

        The title is this thread's job, not the job loop's: setting it twice per job was a
        measurable share of a short job's CPU, and nobody reads a title that fast.
        """
        while True:
            readable, _, _ = select.select([self.sock], [], [], TITLE_REFRESH)
            with self.lock:
                title.state(self.current, self.started)
            if not readable:
                continue
            message = protocol.receive(self.sock)
            if message is None or isinstance(message, protocol.Drain):
                # A master that closed our socket is gone or going: finish up and leave.
                self.stopping.set()
                if message is None:
                    return


def run(settings: WorkerSettings, sock: socket.socket, mark: SettlingMark, slot: Slot) -> int:
    """The child's whole life after fork; returns its exit code."""
    sock.setblocking(True)
    try:
        return Child(settings, sock, mark, slot).main()
    except SystemExit as exit:
        log.warning("A job raised SystemExit(%s); the worker exits", exit.code)
        return EXIT_OK
    except BaseException:
        log.exception("Worker crashed")
        return 1
