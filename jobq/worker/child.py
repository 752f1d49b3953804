"""A worker child's life: claim jobs (one, or a batch: see prefetch.py), report them, run them
in order, acknowledge, report.

The master renews the leases; this process only has to tell it what it holds (reports.py: in
messages and in the fence table), to record outcomes again when its connection fails
(recording.py), and to end its job's leftover processes with each attempt.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import threading
import time
from collections.abc import Callable
from functools import partial

from .. import protocol, wire
from ..app import start_worker
from ..backends.naming import name_process, of_this_host
from ..errors import ConfigurationError, Unacknowledged
from ..lease_clock import kill_point, startable
from ..options import MAX_PREFETCH
from ..queue import Queue
from ..queue.running import work_as
from ..records import ClaimedJob, Claims, Outcome
from . import attempt, title
from .claim_types import ClaimTypes
from .fence import Slot
from .key_share import KeyShare
from .mark import SettlingMark
from .prefetch import PrefetchRule
from .recording import UNACKNOWLEDGED, Recorder
from .recycling import recycle_due
from .reports import Reports
from .session import DatabaseLost, Session, close_quietly, open_session
from .settings import WorkerSettings
from .settling import SettlingReporter

log = logging.getLogger("jobq")

# Exit codes the master reads.
EXIT_OK = 0
EXIT_CANNOT_START = 3

# An idle child polls quickly right after work dried up, then backs off to poll_interval.
FIRST_IDLE_WAIT = 0.05
# How often a child blocked on LISTEN/NOTIFY checks whether it was told to drain.
DRAIN_CHECK = 0.25
# How often the process title follows the running job.
TITLE_REFRESH = 0.5


class Child:
    def __init__(
        self,
        settings: WorkerSettings,
        sock: socket.socket,
        mark: SettlingMark,
        slots: list[Slot],
        reporter: SettlingReporter | None = None,
    ) -> None:
        self.settings = settings
        self.sock = sock
        self.reports = Reports(sock, slots[0], mark)
        self.slot = slots[0]
        self.stopping = threading.Event()
        self.idle_wait = FIRST_IDLE_WAIT
        self.reporter = SettlingReporter(mark) if reporter is None else reporter
        self.recorder = Recorder(settings, self.reports, self.reporter)
        self.done = 0
        vouched = kill_point(settings.lease, settings.safety_margin)
        self.prefetch = PrefetchRule(settings.prefetch, settings.types, vouched)
        self.claim_types = ClaimTypes(settings.types, settings.others, settings.poll_interval)
        self.key_share = KeyShare(settings.workers)

    def main(self) -> int:
        title.starting(self.settings.pool)
        pool = "" if self.settings.pool is None else f" [{self.settings.pool}]"
        name_process(of_this_host(f"jobq worker {os.getpid()}{pool}"))
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
        wire.send(self.sock, protocol.Ready(os.getpid()))
        title.state(None, 0.0)
        threading.Thread(target=self.follow_master, name="master", daemon=True).start()
        return self.work(session)

    def open_session(self, patient: bool) -> Session | None:
        return open_session(self.settings, self.reporter, self.stopping, self.claim, patient)

    def work(self, session: Session) -> int:
        """Run jobs until drained (EXIT_OK) or recycled (see recycling.py)."""
        try:
            return self.run_jobs(session)
        finally:
            close_quietly(session.queue)

    def run_jobs(self, session: Session) -> int:
        batch = self.reports.claimed(session.first)
        while True:
            # A claim already made runs even if a drain came meanwhile: it holds a lease.
            if not batch and self.stopping.is_set():
                return EXIT_OK
            try:
                if not batch:
                    batch = self.reports.claimed(self.next_claim(session))
                    continue
                batch = self.run_batch(session, batch)
            except DatabaseLost as lost:
                log.error("%s: %s", lost.what, lost.__cause__, extra={"event": "db_error"})
                if not self.reconnect(session):
                    return EXIT_OK
                batch = self.reports.claimed(session.first)
                continue
            # With a claim in hand, wants_another() already found no reason to recycle.
            recycle = None if batch else self.recycle_due(self.done)
            if recycle is not None:
                code, why = recycle
                log.info("Recycling worker: %s", why, extra={"event": "recycle"})
                return code

    def wants_another(self) -> bool:
        """Asked when a job's code is done: claim the next job with its acknowledgement?
        Not when the worker is about to drain or to be recycled, nor while the master asks
        for no claims (it cannot renew leases: a job claimed now would only be fenced)."""
        if self.stopping.is_set() or self.slot.claims_paused():
            return False
        return self.recycle_due(self.done + 1) is None

    def chains_one(self, claim: ClaimedJob) -> bool:
        """Whether to acknowledge `claim` with the claim of one job. Not for a job of a type
        the worker has not seen run (unless --prefetch says 1): its acknowledgement claims
        what the prefetch rule asks for once it has, where one more single claim had every
        worker start a burst with two."""
        seen = self.prefetch.fixed is not None or self.prefetch.seen(claim.type)
        return seen and self.claim_size() == 1

    def claim_size(self, queue: Queue | None = None) -> int:
        """How many jobs the next claim asks for: the prefetch rule's, by the worker's share
        of the limited work when `queue` can count it, but never more than
        --max-jobs-per-child leaves this worker to run."""
        share = None if queue is None else self.key_share.share(queue._limited_work, MAX_PREFETCH)
        size = self.prefetch.size(share)
        if self.settings.max_jobs:
            size = min(size, max(1, self.settings.max_jobs - self.done))
        return size

    def claim(self, queue: Queue) -> list[ClaimedJob]:
        """Claim as many jobs as claim_size() says (maybe none, as while claims are paused)."""
        if self.slot.claims_paused() or (types := self.types_now(queue)) is None:
            return []
        size = self.claim_size(queue)
        if size == 1:
            claim = queue.claim(types)
            claims = Claims() if claim is None else Claims([claim])
        else:
            claims = queue.claim_many(size, types, queued=True)
        self.came_back(size, claims.picked, claims)
        return claims

    def types_now(self, queue: Queue, busy: bool = False) -> tuple[str, ...] | None:
        """The types the next claim names (see claim_types.py), which the prefetch rule
        weighs; None: claim nothing."""
        types = self.claim_types.now(queue, busy)
        self.prefetch.types = types or ()
        return types

    def came_back(self, asked: int, got: int, claims: list[ClaimedJob]) -> None:
        """A claim of up to `asked` jobs took `claims` and took or was refused `got` rows
        (see Claims)."""
        self.prefetch.claimed(asked, got)
        self.claim_types.claimed(asked, got)
        self.key_share.claimed(claim.class_name for claim in claims)

    def next_claim(self, session: Session) -> list[ClaimedJob]:
        """Claim jobs, or wait a while (idle) and return none."""
        try:
            claims = self.claim(session.queue)
            if claims:
                self.idle_wait = FIRST_IDLE_WAIT
                session.queue._unmark_idle()
                return claims
            if session.notifying:
                self.wait_for_jobs(session.queue)
            else:
                self.stopping.wait(self.idle_wait)
                self.idle_wait = min(self.idle_wait * 2, self.settings.poll_interval)
        except Exception as error:
            raise DatabaseLost("Claim failed") from error
        return []

    def run_batch(self, session: Session, batch: list[ClaimedJob]) -> list[ClaimedJob]:
        """Run a claim's attempts in order, and acknowledge the completed ones with the next
        claim; returns that claim. The first attempt is reported started already."""
        if len(batch) == 1 and self.chains_one(batch[0]):
            return self.run_one(session, batch[0])
        completed: list[ClaimedJob] = []
        after: list[ClaimedJob] = []  # the attempt before, if it completed
        for index, claim in enumerate(batch):
            if index:
                if not self.may_start(claim):
                    self.release(session, batch[index:])
                    break
                self.reports.starting(claim, after)
            try:
                outcome, ran = self.run_attempt(
                    session, claim, partial(deferred, session.queue, claim)
                )
            except DatabaseLost:
                # Neither acknowledged nor started, as far as this worker can tell: their
                # leases run out, and maintenance does the rest.
                self.reports.ended([(done, UNACKNOWLEDGED) for done in completed])
                self.release(session, batch[index + 1 :], at_database=False)
                raise
            self.done += 1
            after = ran if outcome is None else []
            completed.extend(after)
            if outcome is not None:
                self.reports.ended([(claim, outcome)])
        return self.acknowledge(session, completed)

    def run_one(self, session: Session, claim: ClaimedJob) -> list[ClaimedJob]:
        """One attempt, acknowledged with the claim of the next job in one statement: the
        path of --prefetch 1."""
        types = self.types_now(session.queue, busy=True)

        def more() -> bool:
            # A list gone stale while the job ran is read again before the next claim.
            return types is not None and not self.claim_types.due() and self.wants_another()

        outcome, then = self.run_attempt(
            session,
            claim,
            lambda: listed(session.queue.run_and_claim(claim, types or (), more=more)),
        )
        assert outcome is not None  # run_and_claim always acknowledges
        self.came_back(0 if types is None else 1, len(then), then)
        self.done += 1
        self.reports.ended([(claim, outcome)], then)
        return then

    def run_attempt(
        self,
        session: Session,
        claim: ClaimedJob,
        run: Callable[[], tuple[Outcome | None, list[ClaimedJob]]],
    ) -> tuple[Outcome | None, list[ClaimedJob]]:
        """run() the attempt, recording its outcome on a fresh connection if the session's
        failed; remembers how long it ran, for the prefetch rule."""
        began = time.monotonic()
        try:
            outcome, then = run()
        except Unacknowledged as unacknowledged:
            outcome, then = self.recorder.again_one(session, unacknowledged), []
        except Exception as error:
            self.recorder.lost([claim], error)
        except BaseException:
            # handle() raised SystemExit or the like: its attempt is failed; honour it.
            self.reports.ended([(claim, self.reporter.outcome_of(claim))])
            raise
        self.reports.timed(claim, seconds := time.monotonic() - began)
        self.prefetch.ran(claim.type, seconds)
        return outcome, then

    def may_start(self, claim: ClaimedJob) -> bool:
        """Whether a queued attempt may start: not when draining or due to recycle, nor
        with half its lease or less left (see lease_clock.startable)."""
        if not self.wants_another():
            return False
        settings = self.settings
        if startable(
            claim.expires_monotonic, time.monotonic(), settings.lease, settings.safety_margin
        ):
            return True
        log.info(
            "Job %d waited half its lease in this worker's queue: releasing it and the jobs "
            "behind it",
            claim.id,
            extra={"event": "release_late"},
        )
        return False

    def release(self, session: Session, claims: list[ClaimedJob], at_database: bool = True) -> None:
        """Give back queued attempts: the master stops vouching for them first, then they
        go back to pending (token-guarded). If that fails, their leases run out."""
        if not claims:
            return
        self.reports.releasing(claims)
        if not at_database:
            return
        try:
            session.queue.release([(claim.id, claim.token) for claim in claims])
        except Exception as error:
            log.warning(
                "Could not release unstarted jobs (%s): they wait for their leases",
                error,
                extra={"event": "release_failed"},
            )

    def acknowledge(self, session: Session, completed: list[ClaimedJob]) -> list[ClaimedJob]:
        """Acknowledge the completed attempts of a batch, claiming the next in the same
        statement unless the worker is draining or due to recycle; returns that claim."""
        if not completed:
            return []
        types = self.types_now(session.queue, busy=True) if self.wants_another() else None
        size = 0 if types is None else self.claim_size(session.queue)
        types = types or ()
        try:
            outcomes, then = session.queue.complete_many_and_claim(
                completed, size, types, queued=True
            )
        except Exception as error:
            outcomes = self.recorder.again(
                session,
                completed,
                error,
                lambda queue: queue.complete_many_and_claim(completed, 0, types)[0],
            )
            then = Claims()
        else:
            if size:
                self.came_back(size, then.picked, then)
        hooks = session.queue.hooks
        for claim, outcome in zip(completed, outcomes, strict=True):
            if hooks is not None:
                hooks.after_job(claim, outcome)
        self.reports.ended(list(zip(completed, outcomes, strict=True)), then)
        return then

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
        TTOU) must not wait behind a long --poll-interval, and the wake-up needs no query.
        A worker not yet marked idle marks itself and returns, to claim once more first."""
        if queue._mark_idle():
            return
        deadline = time.monotonic() + self.settings.poll_interval
        while not self.stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or queue._wait_for_jobs(min(remaining, DRAIN_CHECK)):
                return

    def recycle_due(self, done: int) -> tuple[int, str] | None:
        return recycle_due(self.settings, done)

    def show_title(self) -> None:
        self.reports.show()

    def follow_master(self) -> None:
        """Apply the master's messages, and keep the process title up to date.

        The title is this thread's job, not the job loop's: setting it twice per job was a
        measurable share of a short job's CPU, and nobody reads a title that fast.
        """
        while True:
            readable, _, _ = select.select([self.sock], [], [], TITLE_REFRESH)
            self.show_title()
            if not readable:
                continue
            message = wire.receive(self.sock)
            if message is None or isinstance(message, protocol.Drain):
                # A master that closed our socket is gone or going: finish up and leave.
                self.stopping.set()
                if message is None:
                    return
            else:
                self.told(message)

    def told(self, message: protocol.Message) -> None:
        """A message for one attempt (see the concurrent worker): a process worker runs one
        attempt, which its master stops by signal."""


def deferred(queue: Queue, claim: ClaimedJob) -> tuple[Outcome | None, list[ClaimedJob]]:
    """A batch's attempt: its outcome once acknowledged, or None and the completed claim,
    carrying its result, for the batch's acknowledgement."""
    ran = queue.run_unacknowledged(claim)
    return (None, [ran]) if isinstance(ran, ClaimedJob) else (ran, [])


def listed(ran: tuple[Outcome, ClaimedJob | None]) -> tuple[Outcome | None, list[ClaimedJob]]:
    outcome, then = ran
    return outcome, [] if then is None else [then]


def run(worker: Child) -> int:
    """A worker child's whole life after fork; returns its exit code."""
    worker.sock.setblocking(True)
    # Whatever its jobs start carries the worker's mark, for the kills that end an attempt.
    attempt.mark()
    if worker.settings.worker_id is not None:
        work_as(worker.settings.worker_id)
    try:
        return worker.main()
    except SystemExit as exit:
        log.warning("A job raised SystemExit(%s); the worker exits", exit.code)
        return EXIT_OK
    except BaseException:
        log.exception("Worker crashed")
        return 1
