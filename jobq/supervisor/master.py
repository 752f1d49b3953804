"""The master: one loop that keeps the pool, renews every lease, and fences.

The master never waits on the database itself: renewals run in the renewer process and
other queries in the housekeeper process. A slow or dead database can delay a renewal, but
never the loop that kills a worker whose lease can no longer be vouched for.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import os
import select
import selectors
import signal
import time

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from setproctitle import setproctitle

from .. import protocol
from ..backends import SCHEMES
from ..dsn import scheme_of, scrub
from ..queue import job_extra
from ..worker import child
from ..worker.fence import FenceTable
from ..worker.mark import SettlingMark
from . import appcheck, housekeeper, keeper, lease_clock, renewer
from .config import SupervisorConfig
from .endpoint import Endpoint, Response, serve
from .forking import Forked, adopt_orphans, fork
from .lease_clock import Round
from .metrics import Metrics
from .pool import Lease, WorkerProcess, describe_exit, resident_memory
from .signals import SignalQueue

log = logging.getLogger("jobq")

# This many children in a row exiting before they were ready is a crash loop.
CRASH_LOOP_LIMIT = 5
MAX_SPAWN_BACKOFF = 10.0
# How long a stopping master waits for the housekeeper to record its last failures.
HOUSEKEEPER_GRACE = 10.0
# The loop wakes at least this often, so its own bookkeeping never goes stale.
LOOP_TICK = 1.0
# The shortest time between two passes of the loop. Under a stream of short jobs, workers'
# messages come faster than they need handling, and every pass has a fixed cost (system
# calls, the fencing scan); pacing lets one pass take many messages. Nothing the master
# does is that urgent: fences act FENCE_LEAD early, and due moments cut the pause short.
PACE = 0.005
# Rows of the fence table: the most workers one supervisor runs at once.
FENCE_SLOTS = 1024
# Exits a worker makes on purpose: they are not restarts in the metrics' sense.
RECYCLED = {child.EXIT_RECYCLED: None, child.EXIT_MEMORY: "memory"}

# What an attempt is failed with when its child was stopped for a reason of the master's.
STOP_CAUSES = {
    "job_timeout": "Job timed out",
    "shutdown": "Interrupted: the supervisor shut down",
}


class Master:
    def __init__(self, config: SupervisorConfig) -> None:
        self.config = config
        self.target = config.workers
        self.children: dict[int, WorkerProcess] = {}
        self.signals = SignalQueue()
        self.selector = selectors.DefaultSelector()
        self.renewer: Forked | None = None
        self.housekeeper: Forked | None = None
        self.keeper: Forked | None = None
        # Mapped before any fork, so every process shares it.
        self.fences = FenceTable(FENCE_SLOTS)
        self.state = "starting"  # then running, draining (TERM/INT) or stopping (QUIT)
        self.exit_code = 0
        self.generation = 0
        self.startup_failures = 0
        self.next_spawn_at = 0.0
        self.drain_deadline = float("inf")
        self.round: Round | None = None
        self.round_ids = itertools.count(1)
        self.cycle_start = 0.0  # when the current renewal cycle's first round was sent
        self.retrying = False
        self.next_round_at = 0.0
        self.metrics = Metrics(
            SCHEMES.get(scheme_of(config.dsn), "unknown"), config.lease, config.renew_interval
        )
        for job_type in config.types:
            self.metrics.know_type(job_type)
        self.endpoint: Endpoint | None = None
        self.database_problem: str | None = "not checked yet"
        self.database_seen = False  # it answered once: later failures are outages
        self.last_pass = float("-inf")
        self.title = ""
        self.reloads = appcheck.Reloads(
            config.app, self.close_inherited, self.selector, self.reload_checked
        )

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> int:
        # Before anything slow (the app's import) or forked: until a title is set, `ps`
        # shows the command line, DSN and password included, and every child inherits it.
        self.show_title()
        self.config.check()
        appcheck.check_now(self.config, self.close_inherited)
        self.signals.install()
        self.selector.register(self.signals.read_fd, selectors.EVENT_READ, None)
        adopt_orphans()
        self.start_keeper()
        # Before any process is forked: a port that cannot be bound stops the start cleanly.
        if self.config.metrics_port is not None:
            self.serve_metrics_endpoint()
        self.start_renewer()
        self.start_housekeeper()
        self.state = "running"
        log.info(
            "jobq-supervise started: %d workers, types %s, lease %g s",
            self.target,
            ",".join(self.config.types) or "all",
            self.config.lease,
            extra={"event": "started"},
        )
        try:
            while self.state == "running" or self.children:
                self.tick()
        finally:
            self.stop_helpers()
            if self.endpoint is not None:
                self.endpoint.close()
        log.info("jobq-supervise stopped", extra={"event": "stopped"})
        return self.exit_code

    def tick(self) -> None:
        now = time.monotonic()
        due = min(self.next_event(now), now + LOOP_TICK)
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
        # Renewal answers after the workers' messages: an acknowledgement that raced a
        # round must be seen before the round calls its lease lost.
        self.read_renewals()
        self.read_housekeeper()
        for signum in self.signals.take():
            getattr(self, f"handle_{signum.name[3:].lower()}")()
        self.reap()
        now = time.monotonic()
        self.schedule_renewal(now)
        self.fence(now)
        self.manage_pool(now)
        if self.endpoint is not None:
            self.endpoint.tend(now)
        self.show_title()

    def next_event(self, now: float) -> float:
        """The next moment the loop has something to do, unless woken earlier."""
        times = [self.drain_deadline, self.endpoint.due() if self.endpoint else float("inf")]
        if self.round is not None:
            times.append(self.round.sent + self.config.renew_timeout)
        else:
            times.append(self.next_round_at)
        for worker in self.children.values():
            if worker.kill_at is not None and not worker.killed:
                times.append(worker.kill_at)
            if worker.lease is not None and worker.stop_reason is None:
                times.append(self.stop_point(worker.lease))
                if self.config.job_timeout:
                    times.append(worker.lease.started + self.config.job_timeout)
        if self.state == "running" and self.active_count() < self.target:
            times.append(self.next_spawn_at)
        return min(times)

    def stop_point(self, lease: Lease) -> float:
        config = self.config
        return lease_clock.stop_point(lease.expires, config.safety_margin, config.kill_grace)

    # -- children's messages ---------------------------------------------------------------

    def read_messages(self, worker: WorkerProcess) -> None:
        try:
            for message in protocol.waiting(worker.process.sock):
                self.on_message(worker, message)
        except EOFError:
            # It closed its end: it is exiting; the reaper finishes the bookkeeping.
            self.selector.unregister(worker.process.sock)

    def on_message(self, worker: WorkerProcess, message: protocol.Message) -> None:
        if isinstance(message, protocol.Ready):
            worker.ready = True
            self.startup_failures = 0
            log.info("Worker %d ready", worker.pid, extra={"event": "ready"})
            if worker.retiring:
                self.send(worker.process, protocol.Drain())
        elif isinstance(message, protocol.Claimed):
            self.on_claimed(worker, message)
        elif isinstance(message, protocol.Finished):
            if worker.lease is not None:
                seconds = time.monotonic() - worker.lease.started
                self.metrics.on_finished(worker.lease.claim.type, message.outcome, seconds)
            worker.lease = None
            worker.jobs += 1
            if message.then is not None:
                self.on_claimed(worker, message.then)

    def on_claimed(self, worker: WorkerProcess, message: protocol.Claimed) -> None:
        worker.lease = Lease(message.claim(), message.expires_monotonic, time.monotonic())
        self.metrics.on_claimed(message.type)

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
            worker = self.children.pop(pid, None)
            if worker is not None:
                self.buried(worker)
                continue
            how = describe_exit(os.waitpid(pid, 0)[1])
            if self.renewer is not None and pid == self.renewer.pid:
                self.renewer_died(how)
            elif self.housekeeper is not None and pid == self.housekeeper.pid:
                self.helper_died(self.housekeeper, "housekeeper", how)
                self.start_housekeeper()
            elif self.keeper is not None and pid == self.keeper.pid:
                self.helper_died(self.keeper, "fence keeper", how)
                self.start_keeper()

    def buried(self, worker: WorkerProcess) -> None:
        if worker.process.sock in self.selector.get_map():
            self.read_messages(worker)  # what it said before it died still counts
            with contextlib.suppress(KeyError):
                self.selector.unregister(worker.process.sock)
        gone = worker.end_attempt()
        if worker.stop_reason is None and worker.fenced_by_keeper():
            # The master could not vouch for its lease in time, and was late to say so.
            worker.stop_reason = "self_fence"
            self.metrics.killed.labels("self_fence").inc()
        self.fences.release(worker.slot)
        status = os.waitpid(worker.pid, 0)[1]
        worker.process.close()
        worker.mark.close()
        how = describe_exit(status)
        log.info("Worker %d exited (%s)", worker.pid, how, extra={"event": "worker_exited"})
        if worker.lease is not None:
            self.orphaned(worker, worker.lease, how if gone else None)
        self.count_exit(worker, os.waitstatus_to_exitcode(status))
        self.count_startup_failure(worker, how)

    def count_startup_failure(self, worker: WorkerProcess, how: str) -> None:
        if not worker.ready and worker.stop_reason is None:
            self.startup_failures += 1
            if self.startup_failures >= CRASH_LOOP_LIMIT and self.state == "running":
                log.error(
                    "Workers keep exiting before they are ready (%d in a row, the last with %s):"
                    " stopping. The workers' log above says why; check the DSN and --app.",
                    self.startup_failures,
                    how,
                    extra={"event": "crash_loop"},
                )
                self.exit_code = 1
                self.stop_now()
            backoff = min(MAX_SPAWN_BACKOFF, 0.1 * 2**self.startup_failures)
            self.next_spawn_at = time.monotonic() + backoff

    def count_exit(self, worker: WorkerProcess, code: int) -> None:
        if code in RECYCLED:
            reason = RECYCLED[code]
            if reason is not None:
                self.metrics.killed.labels(reason).inc()
        elif self.state == "running" and not worker.retiring and worker.stop_reason is None:
            # Died on its own (a crash, or it could not start); the master's own kills are
            # counted by reason in jobq_workers_killed_total.
            self.metrics.restarts.inc()

    def orphaned(self, worker: WorkerProcess, lease: Lease, how: str | None) -> None:
        """A child died holding an attempt (`how`: None if its processes may still run)."""
        claim = lease.claim
        if how is None:
            self.metrics.unconfirmed.inc()
            log.error(
                "Job %d's processes still run after SIGKILL (worker %d)",
                claim.id,
                worker.pid,
                extra=job_extra(claim, "kill_unconfirmed"),
            )
        if worker.stop_reason in ("renewal", "lost", "self_fence") or how is None:
            # Its database was out of reach, or the job is someone else's already.
            log.warning(
                "Job %d was left to maintenance after its lease (worker %d stopped: %s)",
                claim.id,
                worker.pid,
                worker.stop_reason,
                extra=job_extra(claim, "left_to_maintenance"),
            )
            return
        cause = STOP_CAUSES.get(worker.stop_reason or "", "The worker died")
        if worker.stop_reason == "job_timeout":
            cause += f" after {self.config.job_timeout:g} s"
        message = protocol.FailAttempt(
            protocol.Claimed.of(claim), f"{cause} (worker {worker.pid}, {how})"
        )
        if self.housekeeper is not None:
            self.send(self.housekeeper, message)

    # -- renewal ---------------------------------------------------------------------------

    def start_renewer(self) -> None:
        config = self.config
        self.renewer = fork(
            lambda sock: renewer.serve(config.dsn, config.lease, config.renew_timeout, sock),
            self.close_inherited,
        )
        self.selector.register(self.renewer.sock, selectors.EVENT_READ, None)

    def start_keeper(self) -> None:
        config, master = self.config, os.getpid()
        self.keeper = fork(
            lambda sock: keeper.serve(self.fences, config.safety_margin, master, sock),
            self.close_inherited,
            dies_with_master=False,  # it kills what the workers started when the master dies
        )

    def start_housekeeper(self) -> None:
        config = self.config
        self.housekeeper = fork(
            lambda sock: housekeeper.serve(
                config.dsn, config.lease, config.maintenance_interval, sock
            ),
            self.close_inherited,
        )
        self.selector.register(self.housekeeper.sock, selectors.EVENT_READ, None)

    def read_housekeeper(self) -> None:
        if self.housekeeper is None:
            return
        with contextlib.suppress(EOFError):  # it died: the reaper starts another
            for message in protocol.waiting(self.housekeeper.sock):
                self.on_housekeeping(message)

    def on_housekeeping(self, message: protocol.Message) -> None:
        if isinstance(message, protocol.Maintained):
            self.database_problem = message.error
            self.database_seen |= message.error is None
            if message.counts is not None:
                self.metrics.on_maintained(message.counts)
        elif isinstance(message, protocol.Depth):
            self.metrics.on_depth(message.counts, message.oldest, time.monotonic())
            if self.endpoint is not None:
                self.endpoint.release()  # the scrapes that waited for these figures
        elif isinstance(message, protocol.Settled):
            self.metrics.failed.labels(message.type, message.outcome).inc()

    def retire_helper(self, helper: Forked) -> None:
        """Stop a helper process; the reaper collects it."""
        with contextlib.suppress(KeyError):
            self.selector.unregister(helper.sock)
        helper.signal(signal.SIGKILL)
        helper.sock.close()

    def renewer_died(self, how: str) -> None:
        """The renewer died on its own (a killed one is forgotten when it is killed)."""
        log.warning("The renewer exited (%s): starting another", how, extra={"event": "renewer"})
        assert self.renewer is not None
        self.forget_renewer()
        self.start_renewer()
        if self.round is not None:
            self.round_failed(time.monotonic())

    def forget_renewer(self) -> None:
        assert self.renewer is not None
        self.retire_helper(self.renewer)
        os.close(self.renewer.pidfd)
        self.renewer = None

    def helper_died(self, helper: Forked, name: str, how: str) -> None:
        """The housekeeper or the fence keeper died; the caller starts another."""
        event = name.replace(" ", "_")
        log.warning("The %s exited (%s): starting another", name, how, extra={"event": event})
        with contextlib.suppress(KeyError):
            self.selector.unregister(helper.sock)
        helper.close()

    def stop_helpers(self) -> None:
        """Let the housekeeper fail what it was sent (within 10 s), and the keeper kill what
        is left of any attempt, then stop the helpers."""
        self.state = "stopped"
        if self.housekeeper is not None:
            self.send(self.housekeeper, protocol.Drain())
            # A pidfd turns readable when its process exits.
            select.select([self.housekeeper.pidfd], [], [], HOUSEKEEPER_GRACE)
        if self.keeper is not None:
            self.keeper.sock.close()  # its cue: it kills every attempt still held, and exits
            select.select([self.keeper.pidfd], [], [], HOUSEKEEPER_GRACE)
        for helper in (self.renewer, self.housekeeper, self.keeper):
            if helper is not None:
                helper.signal(signal.SIGKILL)
                os.waitpid(helper.pid, 0)
                helper.close()
        self.renewer = self.housekeeper = self.keeper = None
        self.reap()

    def send(self, process: Forked, message: protocol.Message) -> None:
        with contextlib.suppress(OSError):  # it is gone: the reaper will hear of it
            protocol.send(process.sock, message)

    def schedule_renewal(self, now: float) -> None:
        if self.round is not None:
            if now >= self.round.sent + self.config.renew_timeout:
                log.warning(
                    "Lease renewal timed out after %g s",
                    self.config.renew_timeout,
                    extra={"event": "renewal_timeout"},
                )
                # Its connection may never answer: replace the renewer, then retry.
                if self.renewer is not None:
                    self.forget_renewer()
                self.start_renewer()
                self.round_failed(now)
            return
        if now < self.next_round_at:
            return
        claims = {
            w.lease.claim.id: (w.pid, w.lease.claim.token)
            for w in self.children.values()
            if w.lease is not None and w.stop_reason is None
        }
        if not self.retrying:
            self.cycle_start = now
        if not claims:
            self.retrying = False
            self.next_round_at = now + self.config.renew_interval
            return
        self.round = Round(next(self.round_ids), now, claims)
        if self.renewer is not None:
            pairs = [(job_id, token) for job_id, (_, token) in claims.items()]
            self.send(self.renewer, protocol.Renew(self.round.id, pairs))

    def round_failed(self, now: float) -> None:
        if self.round is not None:
            self.metrics.renewals.labels("error").inc(len(self.round.claims))
        self.round = None
        self.next_round_at, self.retrying = lease_clock.next_round(
            now, self.cycle_start, self.config.renew_interval, False, self.retrying
        )

    def read_renewals(self) -> None:
        if self.renewer is None:
            return
        with contextlib.suppress(EOFError):  # it died: the reaper starts another
            for result in protocol.waiting(self.renewer.sock):
                assert isinstance(result, protocol.Renewed)
                self.on_renewed(result)

    def on_renewed(self, result: protocol.Renewed) -> None:
        current = self.round
        if current is None or result.round != current.id:
            return  # an answer to a round already given up on
        if result.extended is None:
            log.warning("Lease renewal failed: %s", result.error, extra={"event": "renewal_error"})
            self.round_failed(time.monotonic())
            return
        self.round = None
        self.next_round_at, self.retrying = lease_clock.next_round(
            time.monotonic(), self.cycle_start, self.config.renew_interval, True, self.retrying
        )
        self.apply_round(current, set(result.extended))

    def apply_round(self, done: Round, extended: set[int]) -> None:
        lost = 0
        for job_id, (pid, token) in done.claims.items():
            worker = self.children.get(pid)
            if worker is None or worker.lease is None:
                continue
            if (worker.lease.claim.id, worker.lease.claim.token) != (job_id, token):
                continue  # it finished that attempt meanwhile
            if job_id in extended:
                lease = worker.lease
                lease.expires = lease_clock.extended(lease.expires, done.sent, self.config.lease)
                worker.slot.master.write(lease.held_as(pid))
                continue
            # A settling attempt runs no job code any more: most likely its acknowledgement
            # is what made the round miss it, and either way nothing can overlap with it.
            # Read before the messages: the worker clears it only after it sent them.
            settling = worker.mark.settling(job_id, token)
            self.read_messages(worker)  # it may have acknowledged just before the round
            lease = worker.lease
            if lease is not None and lease.claim.token == token and not settling:
                lost += 1
                log.error(
                    "Worker %d lost job %d to another attempt: killing it",
                    pid,
                    job_id,
                    extra=job_extra(worker.lease.claim, "lost"),
                )
                self.stop(worker, "lost", time.monotonic(), at_once=True)
        seconds = time.monotonic() - done.sent
        self.metrics.on_round(seconds, len(extended & done.claims.keys()), lost)

    # -- fencing ---------------------------------------------------------------------------

    def fence(self, now: float) -> None:
        if self.state == "draining" and now >= self.drain_deadline:
            log.warning("Graceful timeout reached: stopping the remaining workers")
            self.stop_now()
        for worker in list(self.children.values()):
            lease = worker.lease
            if lease is not None and worker.stop_reason is None:
                if now >= self.stop_point(lease):
                    log.error(
                        "Lease of job %d cannot be renewed in time: stopping worker %d",
                        lease.claim.id,
                        worker.pid,
                        extra=job_extra(lease.claim, "fenced"),
                    )
                    self.stop(worker, "renewal", now)
                elif self.config.job_timeout and now - lease.started >= self.config.job_timeout:
                    log.warning(
                        "Job %d ran past --job-timeout: stopping worker %d",
                        lease.claim.id,
                        worker.pid,
                        extra=job_extra(lease.claim, "job_timeout"),
                    )
                    self.stop(worker, "job_timeout", now)
            if worker.kill_at is not None and not worker.killed and now >= worker.kill_at:
                worker.kill()

    def stop(self, worker: WorkerProcess, reason: str, now: float, at_once: bool = False) -> None:
        """SIGTERM to its whole attempt now, and SIGKILL after the kill grace, or at the
        lease's kill point if that comes first."""
        worker.stop_reason = reason
        self.metrics.killed.labels(reason).inc()
        expires = None if worker.lease is None else worker.lease.expires
        config = self.config
        kill_at = lease_clock.kill_at(now, config.kill_grace, expires, config.safety_margin)
        if at_once or kill_at <= now:
            worker.kill()
        else:
            worker.terminate()
            worker.kill_at = kill_at

    # -- the pool --------------------------------------------------------------------------

    def active_count(self) -> int:
        return sum(1 for w in self.children.values() if not w.retiring and w.stop_reason is None)

    def manage_pool(self, now: float) -> None:
        if self.state != "running":
            return
        active = self.active_count()
        if active < self.target:
            if now >= self.next_spawn_at:
                self.spawn()
        elif active > self.target:
            self.retire(self.pick_to_retire(), "pool size")
        else:
            self.rotate()

    def pick_to_retire(self) -> WorkerProcess:
        """An idle child if there is one, else the youngest: the least work is lost."""
        candidates = [w for w in self.children.values() if not w.retiring and not w.stop_reason]
        return min(candidates, key=lambda w: (w.lease is not None, -w.spawned))

    def retire(self, worker: WorkerProcess, why: str) -> None:
        if worker.retiring:
            return
        log.info("Retiring worker %d (%s)", worker.pid, why, extra={"event": "retiring"})
        worker.retiring = True
        if worker.ready:
            self.send(worker.process, protocol.Drain())  # else it is told once it says it is ready

    def rotate(self) -> None:
        """After HUP: replace children of older generations one at a time, oldest first."""
        if any(w.retiring or not w.ready for w in self.children.values()):
            return
        outdated = [w for w in self.children.values() if w.generation < self.generation]
        if outdated:
            self.retire(min(outdated, key=lambda w: w.spawned), "reload")

    def spawn(self) -> None:
        settings = dataclasses.replace(self.config.worker_settings(), patient=self.database_seen)
        slot = self.fences.allocate()
        if slot is None:
            log.error("Cannot start more than %d workers", FENCE_SLOTS)
            self.next_spawn_at = time.monotonic() + MAX_SPAWN_BACKOFF
            return
        mark = SettlingMark()
        process = fork(lambda sock: child.run(settings, sock, mark, slot), self.close_inherited)
        worker = WorkerProcess(process, mark, slot, self.generation, time.monotonic())
        self.children[process.pid] = worker
        self.selector.register(process.sock, selectors.EVENT_READ, worker)
        log.info("Spawned worker %d", process.pid, extra={"event": "spawned"})

    def close_inherited(self) -> None:
        """In a new child: let go of the master's pipes and of its siblings' sockets."""
        self.selector.close()
        for fd in self.signals.fds():
            with contextlib.suppress(OSError):
                os.close(fd)
        helpers = [h for h in (self.renewer, self.housekeeper, self.keeper) if h is not None]
        for process in [w.process for w in self.children.values()] + helpers:
            with contextlib.suppress(OSError):
                process.close()
        for sibling in self.children.values():
            sibling.mark.close()

    def show_title(self) -> None:
        types = ",".join(self.config.types) or "all types"
        pool = f"{len(self.children)}/{self.target} workers"
        text = f"jobq-supervise: master {pool} [{types}] {self.state}"
        if text != self.title:
            setproctitle(text)
            self.title = text

    # -- metrics and probes ----------------------------------------------------------------

    def serve_metrics_endpoint(self) -> None:
        port = self.config.metrics_port
        assert port is not None
        routes = {"/metrics": self.scrape, "/healthz": self.health, "/readyz": self.readiness}
        holds = {"/metrics": self.measure_depth}
        self.endpoint = serve(self.selector, self.config.metrics_address, port, routes, holds)

    def measure_depth(self) -> bool:
        """Before a scrape: whether to wait for fresh queue-depth figures (asked for here)."""
        if self.housekeeper is not None and self.metrics.depth.ask(time.monotonic()):
            self.send(self.housekeeper, protocol.MeasureDepth())
        return self.housekeeper is not None and self.metrics.depth.stale(time.monotonic())

    def scrape(self) -> Response:
        busy = sum(1 for w in self.children.values() if w.lease is not None)
        idle = sum(1 for w in self.children.values() if w.ready and w.lease is None)
        self.metrics.on_workers(busy, idle, resident_memory(self.children.values()))
        return 200, CONTENT_TYPE_LATEST, generate_latest(self.metrics.registry)

    def health(self) -> Response:
        """Alive: this loop answered, which is what a liveness probe needs to know."""
        return 200, "text/plain", b"ok\n"

    def readiness(self) -> Response:
        problems = []
        if self.state != "running":
            problems.append(f"the supervisor is {self.state}")
        if not any(w.ready and not w.retiring for w in self.children.values()):
            problems.append("no worker is ready")
        if self.database_problem is not None:
            problems.append(f"database: {scrub(self.database_problem, self.config.dsn)}")
        if problems:
            return 503, "text/plain", ("\n".join(problems) + "\n").encode()
        return 200, "text/plain", b"ready\n"

    # -- signals ---------------------------------------------------------------------------

    def handle_chld(self) -> None:
        """Reaping happens on every tick; the signal only woke the loop."""

    def handle_term(self) -> None:
        if self.state == "draining":
            log.warning("Second stop request: stopping now")
            self.stop_now()
            return
        if self.state != "running":
            return
        log.info(
            "Draining: waiting up to %g s for running jobs",
            self.config.graceful_timeout,
            extra={"event": "draining"},
        )
        self.state = "draining"
        self.drain_deadline = time.monotonic() + self.config.graceful_timeout
        for worker in self.children.values():
            self.retire(worker, "drain")

    handle_int = handle_term

    def handle_quit(self) -> None:
        log.info("Stopping now", extra={"event": "stopping"})
        self.stop_now()

    def stop_now(self) -> None:
        self.state = "stopping"
        self.drain_deadline = float("inf")
        now = time.monotonic()
        for worker in self.children.values():
            if worker.stop_reason is None:
                self.stop(worker, "shutdown", now)

    def handle_hup(self) -> None:
        if self.state == "running":
            self.reloads.request()  # checked in a child: this loop goes on meanwhile

    def reload_checked(self) -> None:
        if self.state == "running":
            self.generation += 1
            log.info("Reloading: replacing workers one at a time", extra={"event": "reload"})

    def handle_ttin(self) -> None:
        self.target += 1
        log.info("Pool size now %d", self.target, extra={"event": "scale"})

    def handle_ttou(self) -> None:
        if self.target > 1:
            self.target -= 1
            log.info("Pool size now %d", self.target, extra={"event": "scale"})
        else:
            log.info("Pool size stays 1: a pool has at least one worker", extra={"event": "scale"})
