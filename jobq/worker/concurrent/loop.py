"""The concurrent worker's loop: up to N attempts at once, on one event loop.

It claims only for its free slots, in one statement; every claimed attempt starts at once,
as a task. As attempts end, their outcomes are recorded in batches: the completed ones in
one statement with the next claim (as --prefetch does), each guarded by its own token, the
failed ones one by one, as a process worker fails them. The database connection is used by
one thread only, so the loop never waits on the database and no two statements ever share
the connection at once. With no attempt running, that thread waits for a wake-up from the
database as a process worker does (on PostgreSQL); with some running, the loop looks for
work as each ends, or after a wait.

An attempt's outcome is recorded only once everything it started has stopped: its code,
the work it handed to the worker's threads (handoff.py) and the processes it started
(leftovers.py). Until then it holds its fence row and its lease, which the master renews.

What the master is told (protocol.py): `claimed`/`finished` with `at_once`, then `settling`
for the attempts that have so ended, before their outcomes are recorded. The master stops
one attempt by its token (`stop`), and kills the whole worker when the attempt still runs a
kill grace later (a thread cannot be stopped alone); the keeper fences each attempt in its
own fence row (slots.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TypeVar

from ... import protocol, tracing, wire
from ...job import Job
from ...queue import Queue
from ...queue.running import worker_id
from ...records import ClaimedJob, Outcome
from .. import attempt, title
from ..child import EXIT_OK, FIRST_IDLE_WAIT, Child
from ..fence import Slot
from ..mark import SettlingMark
from ..recording import UNACKNOWLEDGED
from ..recycling import EXIT_STRAYS
from ..session import DatabaseLost, Session, close_quietly
from ..settings import WorkerSettings
from ..settling import SettlingReporter, end_leftovers
from . import handoff
from .attempts import handled, is_coroutine
from .handoff import AttemptLoop, HandOff
from .inflight import CURRENT, Attempt, InFlight
from .leftovers import Unattributable, kill_confirmed, processes_of
from .slots import Slots

log = logging.getLogger("jobq")

Result = TypeVar("Result")
# An attempt that has ended: the attempt, its claim (with its result), what failed it (None:
# it completed), and its span, which ends once its outcome is recorded.
Ended = tuple[Attempt, ClaimedJob, BaseException | str | None, tracing.AttemptSpan]


class Unwatched(SettlingReporter):
    """The process worker's reporter, less what only makes sense for one attempt at a time:
    the settling mark (a concurrent worker says `settling` instead) and the search for an
    attempt's leftover processes, which cannot tell one running attempt's from another's
    (the concurrent worker's own search is leftovers.py)."""

    def on_claimed(self, claim: ClaimedJob) -> None:
        pass

    def on_settling(self, claim: ClaimedJob) -> None:
        pass


class ConcurrentChild(Child):
    def __init__(
        self, settings: WorkerSettings, sock: socket.socket, mark: SettlingMark, rows: list[Slot]
    ) -> None:
        super().__init__(settings, sock, mark, rows, Unwatched(mark))
        self.slots = Slots(rows)
        self.inflight = InFlight()
        concurrency = self.settings.concurrency
        self.threads = ThreadPoolExecutor(concurrency, thread_name_prefix="jobq-job")
        # The event loop's default executor: what attempts hand to threads is theirs.
        self.handoff = HandOff(self.inflight, concurrency, "jobq-handoff")
        self.database = ThreadPoolExecutor(1, thread_name_prefix="jobq-database")
        # Finds and kills an ended attempt's processes, off the event loop.
        self.reaper = ThreadPoolExecutor(1, thread_name_prefix="jobq-leftovers")
        # Held by every statement on the connection: the database thread's, and the jobs'
        # progress and checkpoint writes (attempts.py).
        self.statement = threading.Lock()
        self.ended: list[Ended] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self.woken: asyncio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        # The worker's own processes, there before any attempt (a pool on_worker_start began).
        self.own: attempt.Processes = frozenset()

    # -- what the process worker asks, for N slots -----------------------------------------

    def claim_size(self, queue: Queue | None = None) -> int:
        """Free slots, but none while draining, paused or due to recycle, and never more
        than --max-jobs-per-child leaves."""
        if self.stopping.is_set() or self.slots.claims_paused():
            return 0
        begun = self.done + self.slots.busy
        if self.recycle_due(begun + 1) is not None:
            return 0
        size = self.slots.vacant
        if self.settings.max_jobs:
            size = min(size, self.settings.max_jobs - begun)
        return max(0, size)

    def claim(self, queue: Queue) -> list[ClaimedJob]:
        size = self.claim_size()
        types = self.claim_types.now(queue) if size else None
        claims = [] if types is None else queue.claim_many(size, types)
        self.claim_types.claimed(size, len(claims))
        return claims

    def show_title(self) -> None:
        """The earliest attempt it runs, as a process worker shows its one, and how many
        slots are busy."""
        running = self.inflight.running()
        if not running:
            title.state(None, 0.0)
            return
        first = running[0]
        slots = f"{len(running)}/{self.slots.capacity} slots busy"
        title.show(f"{title.who} job {first.id} {first.type} {first.class_name} {slots}")

    # -- the loop --------------------------------------------------------------------------

    def work(self, session: Session) -> int:
        try:
            with asyncio.Runner(loop_factory=AttemptLoop) as runner:
                return runner.run(self.serve(session))
        finally:
            close_quietly(session.queue)
            for pool in (self.threads, self.handoff, self.database, self.reaper):
                pool.shutdown(wait=False, cancel_futures=True)

    def told(self, message: protocol.Message) -> None:
        if isinstance(message, protocol.Stop) and self.loop is not None:
            self.loop.call_soon_threadsafe(self.inflight.stop, message.token, message.error)

    async def serve(self, session: Session) -> int:
        self.woken = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        self.loop.set_default_executor(self.handoff)
        handoff.listen(threading.get_native_id())
        handoff.track_asgiref(self.inflight)
        self.own = attempt.identified(attempt.members(os.getpid()))
        self.begin_first(session)
        idle_wait = FIRST_IDLE_WAIT
        while True:
            if not self.slots.busy and not self.ended:
                if self.stopping.is_set():
                    return await self.all_ended(EXIT_OK)
                recycle = self.recycle_due(self.done)
                if recycle is not None:
                    code, why = recycle
                    log.info("Recycling worker: %s", why, extra={"event": "recycle"})
                    return await self.all_ended(code)
            size = self.claim_size()
            try:
                if self.ended or size:
                    claimed = await self.record_and_claim(session, size)
                    if claimed:
                        idle_wait = FIRST_IDLE_WAIT
                    if claimed or not size:
                        continue
                # Nothing to record, and nothing ready for the free slots: wait for an
                # attempt to end, or for the next look at the queue.
                await self.wait_for_work(session, idle_wait)
            except DatabaseLost as lost:
                log.error("%s: %s", lost.what, lost.__cause__, extra={"event": "db_error"})
                if not await self.in_database(self.reconnect, session):
                    return EXIT_OK
                self.begin_first(session)
                continue
            idle_wait = min(idle_wait * 2, self.settings.poll_interval)

    async def all_ended(self, code: int) -> int:
        """Exit `code` once every attempt's task ended its span: each runs no more code, and
        its outcome is recorded."""
        await asyncio.gather(*self.tasks)
        return code

    async def wait_for_work(self, session: Session, seconds: float) -> None:
        """With no attempt running, wait for a wake-up from the database as a process worker
        does, in the database's thread: no attempt can end meanwhile, nor write its progress.
        With some running, or no wake-ups to be had, wait(seconds)."""
        if self.slots.busy or not session.notifying:
            await self.wait(seconds)
            return
        try:
            await self.in_database(self.wait_for_jobs, session.queue)
        except Exception as error:
            raise DatabaseLost("Waiting for jobs failed") from error

    async def wait(self, seconds: float) -> None:
        """Until an attempt ends, or `seconds`. Draining, too: returning at once there would
        spin the loop without ever letting the attempts in flight run on."""
        assert self.woken is not None
        self.woken.clear()
        if self.ended:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.woken.wait(), seconds)

    def begin_first(self, session: Session) -> None:
        """Start the claim a (re)connection made."""
        first = session.first
        report = protocol.Claimed(protocol.attempts(first), at_once=True) if first else None
        self.begin(session, first, report)

    def begin(
        self, session: Session, claims: list[ClaimedJob], report: protocol.Message | None
    ) -> None:
        """Fence each new attempt in a row of its own, tell the master (`report` carries
        them), start them all."""
        started = [Attempt(claim, self.slots.hold(claim)) for claim in claims]
        for each in started:
            self.inflight.add(each)
        if report is not None:
            # Before decoding or running anything: from here on the master renews them.
            wire.send(self.sock, report)
        for each in started:
            task = asyncio.create_task(self.attempt_task(session.queue, each))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def attempt_task(self, queue: Queue, running: Attempt) -> None:
        """One attempt, in its span: run its code, wait until all it started has stopped,
        hand it over to be recorded, and end the span with the outcome recorded (as a
        process worker's span ends); then its after_job hooks, where its code ran: in its
        task, or in one of the threads."""
        with tracing.processing(running.claim, worker_id()) as span:
            ran, error, threaded = await self.run_code(queue, running)
            await running.handed_work_ended()
            if running.spawned:
                await self.end_processes(running)
            loop = asyncio.get_running_loop()
            outcome = running.outcome = loop.create_future()
            self.slots.let_go(running.row)
            self.ended.append((running, ran, error, span))
            self.done += 1
            assert self.woken is not None
            self.woken.set()
            recorded = await outcome
            if recorded is not None:
                span.ended(recorded)
        # Skipped when its outcome could not be recorded, as a process worker skips them.
        if recorded is None or queue.hooks is None:
            return
        if not threaded:
            queue.hooks.after_job(ran, recorded)
            return
        context = contextvars.copy_context()
        await loop.run_in_executor(self.threads, context.run, queue.hooks.after_job, ran, recorded)

    async def run_code(
        self, queue: Queue, running: Attempt
    ) -> tuple[ClaimedJob, BaseException | str | None, bool]:
        """The attempt's code: its claim with its result, what failed it, if anything, and
        whether it ran in a thread."""
        claim = running.claim
        error: BaseException | str | None
        threaded = False
        # In this task's context, and so in its thread and in what it hands off.
        acting = CURRENT.set(running)
        try:
            job = queue._startable(claim)
            if isinstance(job, Job) and is_coroutine(job):
                running.task = asyncio.current_task()
            if running.stop is not None:  # told to stop before it began
                raise asyncio.CancelledError
            if not isinstance(job, Job):
                error = job
            else:
                threaded = not is_coroutine(job)
                handling = await handled(
                    queue, running, job, self.threads, self.statement, self.inflight
                )
                error, claim = handling.error, claim.completed(handling.result)
        except asyncio.CancelledError:
            error = running.stop or "Cancelled"
            log.warning("Job %d cancelled: %s", claim.id, error, extra={"event": "cancelled"})
        except BaseException as escaped:  # SystemExit and the like: fail it, then drain
            log.warning("Job %d raised %r: the worker drains", claim.id, escaped)
            error = escaped
            self.stopping.set()
        finally:
            running.task = None
            CURRENT.reset(acting)
        return claim, error, threaded

    async def end_processes(self, ended: Attempt) -> None:
        """Kill what the ended attempt left running, before its outcome is recorded. If
        processes run that could be another attempt's, the worker stops with all of them."""
        loop = asyncio.get_running_loop()
        master = os.getppid()
        try:
            pids = await loop.run_in_executor(
                self.reaper, processes_of, ended, self.inflight, master, self.own
            )
        except Unattributable as strays:
            log.error(
                "Job %d ended while processes %s ran that could be another attempt's: the "
                "worker stops with every attempt it runs",
                ended.claim.id,
                strays,
                extra={"event": "leftovers_unattributable"},
            )
            attempt.kill(os.getpid(), spare=self.own)
            os._exit(EXIT_STRAYS)
        if pids:
            kill = partial(kill_confirmed, pids)
            await loop.run_in_executor(self.reaper, end_leftovers, ended.claim, kill)

    async def record_and_claim(self, session: Session, size: int) -> list[ClaimedJob]:
        """Record the ended attempts' outcomes and claim `size` jobs for the free slots, in
        the database's thread; report both; start the new attempts."""
        ended, self.ended = self.ended, []
        if ended:
            # Before their outcomes are recorded: a round that misses them kills nothing.
            done = protocol.carried(claim for _, claim, error, _ in ended if not error)
            named = protocol.named(each.claim for each, *_ in ended)
            wire.send(self.sock, protocol.Settling(named, done))
        try:
            outcomes, claims = await self.in_database(self.recorded, session, ended, size)
        except Exception as error:
            # Their leases run out unrenewed, and maintenance settles them.
            lost = [(each.claim.id, each.token, UNACKNOWLEDGED) for each, *_ in ended]
            wire.send(self.sock, protocol.Finished(lost))
            for each, *_ in ended:
                self.settled(each, None)
            raise DatabaseLost("Recording outcomes failed") from error
        for each, outcome in outcomes:
            self.settled(each, outcome)
        finished = [(each.claim.id, each.token, str(outcome)) for each, outcome in outcomes]
        report = protocol.Finished(finished, protocol.attempts(claims), at_once=True)
        self.begin(session, claims, report if finished or claims else None)
        return claims

    def settled(self, ended: Attempt, outcome: Outcome | None) -> None:
        assert ended.outcome is not None
        ended.outcome.set_result(outcome)
        self.inflight.remove(ended)

    def recorded(
        self, session: Session, ended: list[Ended], size: int
    ) -> tuple[list[tuple[Attempt, Outcome]], list[ClaimedJob]]:
        """In the database's thread: fail the failed attempts, then complete the completed
        ones with the next claim in one statement."""
        queue = session.queue
        # Busy with outcomes to record, a failed read of the types claims nothing.
        types = self.claim_types.now(queue, busy=bool(ended)) if size else None
        size = 0 if types is None else size
        outcomes = [
            (each, queue._failed(claim, error, span)) for each, claim, error, span in ended if error
        ]
        completed = [(each, claim) for each, claim, error, _ in ended if error is None]
        claims: list[ClaimedJob] = []
        if completed:
            acknowledged = [claim for _, claim in completed]
            settled, claims = queue.complete_many_and_claim(acknowledged, size, types or ())
            outcomes += zip((each for each, _ in completed), settled, strict=True)
        elif size:
            claims = queue.claim_many(size, types or ())
        if claims:
            queue._unmark_idle()
        self.claim_types.claimed(size, len(claims))
        return outcomes, claims

    async def in_database(self, call: Callable[..., Result], *args: object) -> Result:
        return await asyncio.get_running_loop().run_in_executor(
            self.database, self.one_at_a_time, call, *args
        )

    def one_at_a_time(self, call: Callable[..., Result], *args: object) -> Result:
        with self.statement:
            return call(*args)
