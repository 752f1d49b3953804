"""The master: one loop that keeps the pools, renews every lease, and fences.

The master never waits on the database itself: renewals run in the renewer process and
other queries in the housekeeper process. A slow or dead database can delay a renewal, but
never the loop that kills a worker whose lease can no longer be vouched for.

What it delegates holds the state it shares (shared.py), never the master: the pools' rules
are pools.py's and pool.py's, how a worker is stopped stopping.py's, the helpers' lifecycle
(restarts, backoff) helpers.py's, renewal rounds renewal.py's, the endpoint's pages
probes.py's. The loop, messages and signals are here."""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import time

from setproctitle import setproctitle

from .. import logs, protocol, wire
from ..backends import SCHEMES
from ..dsn import scheme_of
from ..outcomes import job_extra
from . import appcheck, settlement
from .config import SupervisorConfig
from .control import Control, open_control
from .emptying import Emptying
from .endpoint import Endpoint
from .forking import adopt_orphans
from .heartbeat import Heartbeats
from .helpers import Helpers
from .metrics import Metrics
from .pool import describe_exit
from .pools import Pools
from .probes import Probes
from .renewal import Missed, Renewals
from .shared import Shared
from .signals import SignalQueue
from .states import Helper, Phase, StopReason
from .workers import WorkerProcess

log = logging.getLogger("jobq")

# The loop wakes at least this often, so its own bookkeeping never goes stale.
LOOP_TICK = 1.0
# The shortest time between two passes of the loop. Under a stream of short jobs, workers'
# messages come faster than they need handling, and every pass has a fixed cost (system
# calls, the fencing scan); pacing lets one pass take many messages. Nothing the master
# does is that urgent: fences act FENCE_LEAD early, and due moments cut the pause short.
PACE = 0.005


class Master:
    def __init__(self, config: SupervisorConfig) -> None:
        self.config = config
        self.signals = SignalQueue()
        self.selector = selectors.DefaultSelector()
        self.metrics = Metrics(
            SCHEMES.get(scheme_of(config.dsn), "unknown"), config.lease, config.renew_interval
        )
        for pool in config.pool_specs():
            for job_type in pool.types:
                self.metrics.know_type(job_type)
        self.shared = Shared(config, self.selector, self.metrics, self.close_inherited)
        self.pools = Pools(self.shared)
        self.stopper = self.pools.stopper
        self.helpers = Helpers(self.shared, self.pools.fences)
        self.renewals = Renewals(config, self.metrics)
        self.probes = Probes(self.shared, self.pools, self.helpers)
        self.emptying = Emptying(self.shared, self.pools, self.helpers)
        self.heartbeats = Heartbeats(self.shared, self.pools, self.helpers)
        self.helpers.work_measured = self.on_work_measured
        self.endpoint: Endpoint | None = None
        self.control: Control | None = None
        self.exit_code = 0
        self.drain_deadline = float("inf")
        self.last_pass = float("-inf")
        self.sending = False  # some message waits for a socket to take it
        self.title = ""
        self.reloads = appcheck.Reloads(
            config.app, self.close_inherited, self.selector, self.reload_checked
        )

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> int:
        # Before anything slow (the app's import) or forked: until a title is set, `ps`
        # shows the command line, DSN and password included, and every child inherits it.
        self.show_title()
        logs.never_block()  # a stalled log pipe must not hold up a fence
        self.config.check()
        wire.limit()  # measured once, before any fork: every message is split to fit it
        # A database that answered the check is known to work: from here a failure is an
        # outage, which new workers wait out rather than count as a crash loop (the
        # housekeeper, which says so later, first imports the application).
        self.helpers.database_seen = appcheck.check_now(self.config, self.close_inherited)
        if self.config.preload:
            appcheck.preload(self.config.app)
        self.signals.install()
        self.selector.register(self.signals.read_fd, selectors.EVENT_READ, None)
        adopt_orphans()
        failed = self.shared.metrics.accept_errors.labels("control").inc
        self.control = open_control(self.selector, self.pools, failed)
        self.helpers.start(Helper.KEEPER)
        # Before any process is forked: a port that cannot be bound stops the start cleanly.
        if self.config.metrics_port is not None:
            self.endpoint = self.probes.serve()
            self.helpers.depth_read = self.endpoint.release  # the scrapes that waited for it
        self.helpers.start(Helper.RENEWER)
        self.helpers.start(Helper.HOUSEKEEPER)
        self.shared.phase = Phase.RUNNING
        log.info(
            "jobq-supervise started: %s, lease %g s",
            self.pools.described(),
            self.config.lease,
            extra={"event": "started"},
        )
        try:
            while self.shared.phase is Phase.RUNNING or self.pools.children:
                self.tick()
        finally:
            self.shared.phase = Phase.STOPPED
            self.heartbeats.tend(time.monotonic(), last=True)
            self.helpers.stop()
            self.reap()
            for opened in self.served():
                opened.close()
        log.info("jobq-supervise stopped", extra={"event": "stopped"})
        return self.exit_code

    def tick(self) -> None:
        now = time.monotonic()
        due = min(self.next_event(), now + LOOP_TICK)
        pause = min(self.last_pass + PACE, due) - now
        if pause > 0:
            time.sleep(pause)
            now = time.monotonic()
        self.last_pass = now
        timeout = due - now
        for key, mask in self.selector.select(max(0.0, timeout)):
            if isinstance(key.data, WorkerProcess):
                self.read_messages(key.data)
            elif key.data is not None:
                key.data.on_event(mask)
        # Before the renewal answers and the fences, which act on the attempts that run.
        self.pools.follow()
        # Renewal answers after the workers' messages: an acknowledgement that raced a
        # round must be seen before the round calls its lease lost.
        for result in self.helpers.renewals():
            self.on_renewed(result)
        self.helpers.read_housekeeper()
        for signum in self.signals.take():
            getattr(self, f"handle_{signum.name[3:].lower()}")()
        self.reap()
        now = time.monotonic()
        self.helpers.tend(now)
        self.heartbeats.tend(now)
        self.renew(now)
        self.fence(now)
        self.sending = self.helpers.flush() | self.pools.flush()
        if self.shared.phase is Phase.RUNNING:
            self.pools.manage(now, patient=self.helpers.database_seen)
            self.emptying.tend(now)
        for served in self.served():
            served.tend(now)
        self.show_title()

    def served(self) -> list[Endpoint | Control]:
        """The sockets the master serves: the metrics endpoint and the control socket."""
        return [each for each in (self.endpoint, self.control) if each is not None]

    def next_event(self) -> float:
        """The next moment the loop has something to do, unless woken earlier."""
        if self.sending:
            return self.last_pass + PACE  # a message waits for its socket: the next pass sends on
        running = self.shared.phase is Phase.RUNNING
        held = min((served.due() for served in self.served()), default=float("inf"))
        due = (self.drain_deadline, self.helpers.due(), self.renewals.due(), self.heartbeats.due())
        following = self.last_pass + max(PACE, self.pools.follow_every())
        return min(*due, held, following, self.pools.next_due(running))

    def fence(self, now: float) -> None:
        if self.shared.phase is Phase.DRAINING and now >= self.drain_deadline:
            log.warning("Graceful timeout reached: stopping the remaining workers")
            self.stop_now()
        self.pools.fence(now)

    def on_work_measured(self, left: bool) -> None:
        if self.emptying.done(left):
            self.handle_term()

    # -- workers' messages -----------------------------------------------------------------

    def read_messages(self, worker: WorkerProcess) -> None:
        try:
            for message in wire.waiting(worker.process.sock):
                self.on_message(worker, message)
        except EOFError:
            # It closed its end: it is exiting; the reaper finishes the bookkeeping. Read
            # again before it is reaped (a renewal round that missed it), the socket says EOF
            # again, and is no longer registered.
            with contextlib.suppress(KeyError):
                self.selector.unregister(worker.process.sock)

    def on_message(self, worker: WorkerProcess, message: protocol.Message) -> None:
        if isinstance(message, protocol.Ready):
            self.pools.on_ready(worker)
        elif isinstance(message, protocol.Claimed):
            self.on_claimed(worker, message.attempts, message.at_once)
        elif isinstance(message, protocol.Settling):
            worker.settling(message.attempts, time.monotonic(), dict(message.results))
        elif isinstance(message, protocol.Finished):
            now = time.monotonic()
            ran = message.ran or [None] * len(message.outcomes)
            for (job_id, token, outcome), timed in zip(message.outcomes, ran, strict=True):
                lease = worker.finished(job_id, token)
                if lease is not None:
                    seconds = (lease.ended or now) - lease.started if timed is None else timed
                    self.metrics.on_finished(lease.claim.type, outcome, seconds)
                worker.jobs += 1
            if message.then:
                self.on_claimed(worker, message.then, message.at_once)
        elif isinstance(message, protocol.Releasing):
            for lease in worker.released(message.attempts):
                self.metrics.on_released(lease.claim.type)

    def on_claimed(
        self, worker: WorkerProcess, attempts: list[protocol.Row], at_once: bool
    ) -> None:
        for claim in worker.claimed(attempts, time.monotonic(), at_once):
            self.metrics.on_claimed(claim.type)

    # -- reaping ---------------------------------------------------------------------------

    def reap(self) -> None:
        """Reap every exited child: workers, helpers, and escapees of jobs (the master is
        their subreaper), which are reaped quietly."""
        while True:
            try:
                # WNOWAIT: a worker stays unreaped while its attempt is killed, so its pid,
                # which is its process group's id, cannot be reused meanwhile.
                exited = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if exited is None or exited.si_pid == 0:
                return
            pid = exited.si_pid
            worker = self.pools.children.pop(pid, None)
            if worker is not None:
                self.buried(worker)
                continue
            how = describe_exit(os.waitpid(pid, 0)[1])
            if self.helpers.reaped(pid, how) is Helper.RENEWER and self.renewals.round:
                self.renewals.failed(time.monotonic())

    def buried(self, worker: WorkerProcess) -> None:
        if worker.process.sock in self.selector.get_map():
            self.read_messages(worker)  # what it said before it died still counts
            with contextlib.suppress(KeyError):
                self.selector.unregister(worker.process.sock)
        worker.follow_left()  # then what its fence slot says: the attempt it was running
        running = self.shared.phase is Phase.RUNNING
        how, gone = self.pools.bury(worker, running)
        failures = [
            settlement.orphaned(worker, lease, how if gone else None, self.shared)
            for lease in worker.running.values()
        ]
        # Held for a housekeeper that is missing or being replaced: the next one does them.
        for settling in (*failures, settlement.left_behind(worker)):
            if settling is not None:
                self.helpers.tell(Helper.HOUSEKEEPER, settling)
        if self.pools.crash_looping(worker, how, running):
            self.exit_code = 1
            self.stop_now()

    # -- renewal ---------------------------------------------------------------------------

    def renew(self, now: float) -> None:
        """Send the renewal round that is due, or give up on one that timed out."""
        if now < self.renewals.due():
            return
        if self.renewals.timed_out(now):
            # Its connection may never answer: replace the renewer, then retry.
            self.helpers.saw_database(
                f"lease renewal timed out after {self.config.renew_timeout:g} s"
            )
            self.helpers.replace(Helper.RENEWER)
            return
        request = self.renewals.start(now, self.pools.held(), self.pools.started_unrecorded(now))
        if request is not None:
            self.helpers.tell(Helper.RENEWER, request)  # or to the renewer started again

    def on_renewed(self, result: protocol.Renewed) -> None:
        if self.renewals.round is not None and result.round == self.renewals.round.id:
            self.helpers.saw_database(result.error)
        answer = self.renewals.answered(result, self.pools.children)
        if answer is None:
            return
        lost = sum(self.lost(missed) for missed in answer.missed)
        for worker, lease in answer.cancelled:
            self.stopper.cancel(worker, lease, time.monotonic())
        seconds = time.monotonic() - answer.round.sent
        self.metrics.on_round(seconds, answer.extended, lost)

    def lost(self, missed: Missed) -> bool:
        """Kill a worker whose running attempt a round missed, unless it just ended that
        attempt; remember a queued one as lost (its worker is killed if it starts it). A
        completed one runs no code: its acknowledgement will be refused, nothing more."""
        worker = missed.worker
        # A settling attempt runs no job code any more: most likely its acknowledgement
        # is what made the round miss it, and either way nothing can overlap with it.
        # Read before the messages: the worker clears it only after it sent them.
        settling = worker.mark.settling(missed.job_id, missed.token)
        self.read_messages(worker)  # it may have acknowledged just before the round
        self.pools.follow(worker)  # or started a queued attempt
        if worker.lose(missed.job_id, missed.token):
            return False
        lease = worker.running.get(missed.job_id)
        if lease is None or lease.claim.token != missed.token or settling:
            return False
        self.stopper.stop(worker, StopReason.LOST, time.monotonic(), at_once=True)
        log.error(
            "Worker %d lost job %d to another attempt: killed it",
            worker.pid,
            missed.job_id,
            extra=job_extra(lease.claim, "lost"),
        )
        return True

    # -- children --------------------------------------------------------------------------

    def close_inherited(self) -> None:
        """In a new child: let go of the master's selector and its siblings' memory; fork()
        then closes every descriptor the child does not use."""
        self.selector.close()
        for sibling in self.pools.children.values():
            sibling.mark.close()

    def show_title(self) -> None:
        text = f"jobq-supervise: master {self.pools.title()} {self.shared.phase}"
        if text != self.title:
            setproctitle(text)
            self.title = text

    # -- signals ---------------------------------------------------------------------------

    def handle_chld(self) -> None:
        """Reaping happens on every tick; the signal only woke the loop."""

    def handle_term(self) -> None:
        if self.shared.phase is Phase.DRAINING:
            log.warning("Second stop request: stopping now")
            self.stop_now()
            return
        if self.shared.phase is not Phase.RUNNING:
            return
        log.info(
            "Draining: waiting up to %g s for running jobs",
            self.config.graceful_timeout,
            extra={"event": "draining"},
        )
        self.shared.phase = Phase.DRAINING
        self.drain_deadline = time.monotonic() + self.config.graceful_timeout
        self.pools.drain_all()

    handle_int = handle_term

    def handle_quit(self) -> None:
        log.info("Stopping now", extra={"event": "stopping"})
        self.stop_now()

    def stop_now(self) -> None:
        self.shared.phase = Phase.STOPPING
        self.drain_deadline = float("inf")
        self.pools.stop_all(time.monotonic())

    def handle_hup(self) -> None:
        if self.shared.phase is Phase.RUNNING:
            self.reloads.request()  # checked in a child: this loop goes on meanwhile

    def reload_checked(self) -> None:
        if self.shared.phase is Phase.RUNNING:
            self.pools.generation += 1
            log.info("Reloading: replacing workers one at a time", extra={"event": "reload"})
            if self.config.preload:
                log.warning(
                    "--preload: the new workers run the application's code as the master "
                    "loaded it at start; restart the supervisor to load changed code",
                    extra={"event": "reload_preloaded"},
                )
            self.helpers.refresh(Helper.HOUSEKEEPER)  # it imports the app for the schedules

    def handle_ttin(self) -> None:
        self.pools.scale(None, +1)

    def handle_ttou(self) -> None:
        self.pools.scale(None, -1)
