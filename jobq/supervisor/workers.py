"""A worker process as the master knows it: its process, its shared memory, and the attempts
it holds. With --prefetch a worker holds several: the one it runs, the ones it claimed with it
and has not started, and the ones it completed and has not acknowledged yet. With
--concurrency N it runs up to N at once. The master renews them all, fences the running ones,
and knows which is which from the worker's messages and, for the start of a queued one, from
the worker's fence slot (see protocol.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from .. import protocol
from ..records import ClaimedJob
from ..worker import attempt
from ..worker.fence import Slot, token_key
from ..worker.mark import SettlingMark
from .attempts import Attempt, Attempts, State
from .forking import Forked
from .states import StopReason, WorkerState

# How long the master waits for a dead worker's attempt to be confirmed gone.
CONFIRM_KILL = 1.0


@dataclass
class WorkerProcess:
    process: Forked
    mark: SettlingMark
    slots: list[Slot]  # its rows of the fence table: one per attempt it may run at once
    worker_id: str  # what every row it claims is marked with (see running.worker_id)
    generation: int
    spawned: float
    pool: str  # its pool's name
    ready: bool = False
    # Its attempts, each in the state its messages and its fence slot put it in (see
    # attempts.py); the maps below are views of them by state.
    attempts: Attempts = field(default_factory=Attempts)
    retiring: bool = False  # told to drain: it finishes its job, then exits
    # Set once the master decided to stop the whole worker by signal: why, and when SIGKILL
    # follows the SIGTERM already sent. A stop for one attempt is called off with its end
    # (see Attempt.stops_worker).
    stop_reason: StopReason | None = None
    kill_at: float | None = None
    killed: bool = False
    jobs: int = 0

    @property
    def pid(self) -> int:
        return self.process.pid

    # -- its attempts by state ---------------------------------------------------------------

    @property
    def running(self) -> Mapping[int, Attempt]:
        """The attempts it runs, by job id: at most one, but in a concurrent worker."""
        return self.attempts.running()

    @property
    def queued(self) -> Mapping[int, Attempt]:
        """Attempts it claimed with the running one (--prefetch) and has not started, in
        order."""
        return self.attempts.of(State.CLAIMED)

    @property
    def completed(self) -> Mapping[int, Attempt]:
        """Attempts it ran to completion and has not acknowledged yet: it acknowledges them
        together, with its next claim."""
        return self.attempts.of(State.COMPLETED)

    @property
    def unrecorded(self) -> Mapping[int, Attempt]:
        """Attempts whose code is done and whose end only the worker can record: failures,
        and completions whose result did not come with their report. Should it die first,
        they are left to maintenance after their leases."""
        return self.attempts.of(State.UNRECORDED)

    @property
    def lost(self) -> set[int]:
        """Queued attempts a renewal round did not extend: another attempt may own their
        jobs."""
        return set(self.attempts.of(State.LOST))

    @property
    def stopped(self) -> Attempt | None:
        """The attempt that the whole worker's stop is for, if it was for one."""
        return next((each for each in self.attempts.by_id.values() if each.stops_worker), None)

    @property
    def busy(self) -> bool:
        return len(self.attempts) > len(self.attempts.of(State.LOST))

    @property
    def earliest(self) -> Attempt | None:
        """The running attempt whose lease ends first: the one a stop's kill must precede."""
        return min(self.running.values(), key=lambda lease: lease.expires, default=None)

    @property
    def state(self) -> WorkerState:
        if self.busy:
            return WorkerState.BUSY
        return WorkerState.IDLE if self.ready else WorkerState.STARTING

    def terminate(self) -> None:
        """SIGTERM to its whole process group: a job's subprocesses get the same chance to
        stop cleanly."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL it and every process of its attempt (confirmed once it has exited)."""
        attempt.kill(self.pid)
        self.killed = True

    def end_attempt(self) -> bool:
        """Once it has exited, but before it is reaped (its pid, its group's id, cannot be
        reused till then): kill what is left of its attempt. Whether that is confirmed gone."""
        if not self.running:
            attempt.kill(self.pid)  # nothing should be left; make sure, cheaply
            return True
        return attempt.kill_and_confirm(self.pid, CONFIRM_KILL)

    def fenced_by_keeper(self) -> bool:
        """Whether the fence keeper killed it for an attempt it ran."""
        fenced = [slot.keeper.read() for slot in self.slots]
        return any(
            lease.held_as(self.pid).same_attempt(hold)
            for lease in self.running.values()
            for hold in fenced
        )

    def vouch(self, lease: Attempt) -> None:
        """Write the master's best known end of a running attempt's lease into the fence
        row its worker holds it in (see worker/fence.py)."""
        held = lease.held_as(self.pid)
        for slot in self.slots:
            if held.same_attempt(slot.worker.read()):
                slot.master.write(held)
                return

    # -- its attempts, as its messages tell them -------------------------------------------

    def leases(self) -> Iterator[Attempt]:
        """Every attempt the master vouches for: the running one, unless the worker is being
        stopped, and its queued and completed ones, which run no code."""
        if self.stop_reason is None:
            yield from self.running.values()
        yield from self.queued.values()
        yield from self.completed.values()
        yield from self.unrecorded.values()

    def holding(self, job_id: int, token: str) -> Attempt | None:
        """That attempt, if the master still vouches for it (a lost one it does not)."""
        held = self.attempts.get(job_id)
        if held is None or held.state is State.LOST or held.claim.token != token:
            return None
        return held

    def claimed(
        self, attempts: list[protocol.Row], now: float, at_once: bool = False
    ) -> list[ClaimedJob]:
        """It claimed these: it runs them all now (`at_once`), or the first now and the
        others in order after it. Returns them as claims."""
        claims = protocol.claims(attempts)
        for index, claim in enumerate(claims):
            self.attempts.claimed(claim, now, runs=at_once or index == 0)
        return claims

    def lose(self, job_id: int, token: str) -> bool:
        """A renewal round did not extend this attempt: if it was queued, remember it lost
        (its worker is killed should it start it). Whether it was."""
        queued = self.queued.get(job_id)
        if queued is None or queued.claim.token != token:
            return False
        self.attempts.lose(queued)
        return True

    def follow(self) -> int | None:
        """Catch up with its fence slot, once its messages are read: the queued attempt the
        slot names started, and the ones before it ended. Returns that attempt's id, and
        also a lost one's, which it must not have started; None if it started none."""
        if not (self.queued or self.attempts.of(State.LOST)):
            return None
        hold = self.slots[0].worker.read()
        if hold is None:
            return None  # a write in progress: the next pass reads it
        if hold.job in self.attempts.of(State.LOST):
            return hold.job
        queued = self.queued.get(hold.job)
        if queued is None or token_key(queued.claim.token) != hold.token:
            return None
        self.advance(hold.job, hold.since)
        return hold.job

    def follow_left(self) -> None:
        """Once it is dead and its messages read: follow what its slot was left saying. If
        it died writing there, the attempt the slot names (the one it held, or the next) may
        have ended or not have started: that one is left to maintenance after its lease,
        neither failed nor released; so is every one the master cannot place, if the slot
        names none of them."""
        hold, whole = self.slots[0].worker.left()
        named = self.running.get(hold.job) or self.queued.get(hold.job)
        if whole:
            if named is not None and token_key(named.claim.token) == hold.token:
                self.advance(hold.job, hold.since)
            return
        if not self.queued:
            return  # no attempt in doubt: the one that ran ended as its messages said
        if named is None:
            doubtful = [*self.running.values(), *self.queued.values()]
        else:
            self.advance(hold.job, hold.since)
            doubtful = [self.running[hold.job]]
        for each in doubtful:
            self.attempts.doubt(each)

    def advance(self, job_id: int, since: float) -> Attempt | None:
        """It started this queued attempt, at `since`: every attempt it ran before it, that it
        reported nothing more of, completed with no result (see worker/reports.py). Returns
        the started one; None if it was not queued."""
        if job_id not in self.queued:
            return None
        # A worker that queues attempts runs one at a time.
        for running in list(self.running.values()):
            self.settle(running, since, True, None)
        for queued in list(self.queued.values()):
            self.attempts.start(queued, since)
            if queued.claim.id == job_id:
                return queued
            self.settle(queued, since, True, None)
        return None  # not reached: job_id is queued

    def settling(
        self, attempts: list[protocol.Named], now: float, completed: Mapping[int, str | None]
    ) -> None:
        """These attempts' code is done: their outcomes are being recorded. Those in
        `completed` completed, with these encoded results. One the master had taken for
        completed with no result, from the fence slot, gets its result now. An attempt it
        no longer holds is passed over."""
        for job_id, token in attempts:
            held = self.holding(job_id, token)
            if held is None:
                continue
            self.advance(job_id, now)
            if held.runs or held.state is State.COMPLETED:
                self.settle(held, now, job_id in completed, completed.get(job_id))

    def settle(self, held: Attempt, now: float, completed: bool, result: str | None) -> None:
        self.attempts.settle(held, now, completed, result)
        self.ended(held)

    def finished(self, job_id: int, token: str) -> Attempt | None:
        """It acknowledged this attempt: the attempt it ends, if the master still had it."""
        held = self.holding(job_id, token)
        if held is None:
            return None
        self.advance(job_id, time.monotonic())
        runs = held.runs
        self.attempts.end(held)
        if runs:
            self.ended(held)
        return held

    def ended(self, held: Attempt) -> None:
        """The attempt's code ended: a stop that was for it is over (its job's own SIGTERM
        handler ended it), and so is the SIGKILL that was to follow. The worker, told to
        drain when stopped, runs at most what it already claimed, then exits."""
        if held.stops_worker:
            held.stops_worker = False
            self.stop_reason = self.kill_at = None

    def stop_for(self, reason: StopReason, held: Attempt | None) -> None:
        """The whole worker is stopped by signal, for this attempt (None: for none of them,
        as at shutdown)."""
        self.stop_reason = reason
        stopped = self.stopped
        if stopped is not None:
            stopped.stops_worker = False
        if held is not None:
            self.attempts.stop_worker(held)

    def released(self, attempts: list[protocol.Named]) -> list[Attempt]:
        """It gives these queued attempts back: the master no longer vouches for them.
        Returns the ones it held."""
        given = []
        for job_id, token in attempts:
            held = self.attempts.get(job_id)
            if held is None:
                continue
            if held.state is State.CLAIMED and held.claim.token == token:
                self.attempts.end(held)
                given.append(held)
            elif held.state is State.LOST:
                # A lost one (master.lost) is no longer queued; it runs nothing now either.
                self.attempts.end(held)
        return given
