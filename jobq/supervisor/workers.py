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
from ..worker.fence import Hold, Slot, token_key
from ..worker.mark import SettlingMark
from .forking import Forked
from .states import StopReason, WorkerState

# How long the master waits for a dead worker's attempt to be confirmed gone.
CONFIRM_KILL = 1.0


@dataclass
class Lease:
    """An attempt a worker holds, as the master renews and fences it."""

    claim: ClaimedJob
    expires: float  # monotonic: the lease certainly lasts until then, never longer
    started: float  # monotonic: when the master learned the attempt started
    ended: float | None = None  # when its code was done, for one awaiting acknowledgement
    # Whether its start is recorded: by its claim, unless it was claimed behind others (a
    # queued attempt), then by the first renewal round after it started, or by its end.
    start_recorded: bool = True

    def held_as(self, pid: int) -> Hold:
        """This attempt as the fence table writes it."""
        return Hold(pid, self.claim.id, token_key(self.claim.token), self.expires)


def named(lease: Lease) -> protocol.Named:
    return lease.claim.id, lease.claim.token


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
    # The attempts it runs, by job id: at most one, but in a concurrent worker.
    running: dict[int, Lease] = field(default_factory=dict)
    # Attempts it claimed with that one (--prefetch) and has not started, in order.
    queued: dict[int, Lease] = field(default_factory=dict)
    # Attempts it ran to completion and has not acknowledged yet: it acknowledges them
    # together, with its next claim.
    completed: dict[int, Lease] = field(default_factory=dict)
    # Attempts whose code is done and whose end only the worker can record: failures, and
    # completions whose result did not come with their report. Should it die first, they are
    # left to maintenance after their leases.
    unrecorded: dict[int, Lease] = field(default_factory=dict)
    # Queued attempts a renewal round did not extend: another attempt may own their jobs.
    lost: set[int] = field(default_factory=set)
    retiring: bool = False  # told to drain: it finishes its job, then exits
    stop_reason: StopReason | None = None  # set once the master decided to stop it by signal
    kill_at: float | None = None  # when SIGKILL follows the SIGTERM already sent
    stopped: Lease | None = None  # the attempt that SIGTERM stops, if it was for one
    # Running attempts of a concurrent worker told to stop alone: job id -> (the moment the
    # whole worker is killed if the attempt still runs then, why it was stopped).
    stopping: dict[int, tuple[float, StopReason]] = field(default_factory=dict)
    killed: bool = False
    jobs: int = 0

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def busy(self) -> bool:
        return any((self.running, self.queued, self.completed, self.unrecorded))

    @property
    def earliest(self) -> Lease | None:
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

    def vouch(self, lease: Lease) -> None:
        """Write the master's best known end of a running attempt's lease into the fence
        row its worker holds it in (see worker/fence.py)."""
        held = lease.held_as(self.pid)
        for slot in self.slots:
            if held.same_attempt(slot.worker.read()):
                slot.master.write(held)
                return

    # -- its attempts, as its messages tell them -------------------------------------------

    def leases(self) -> Iterator[Lease]:
        """Every attempt the master vouches for: the running one, unless the worker is being
        stopped, and its queued and completed ones, which run no code."""
        if self.stop_reason is None:
            yield from self.running.values()
        yield from self.queued.values()
        yield from self.completed.values()
        yield from self.unrecorded.values()

    def holding(self, job_id: int, token: str) -> Lease | None:
        """Its lease of that attempt, if it still holds it."""
        for lease in (
            self.running.get(job_id),
            self.queued.get(job_id),
            self.completed.get(job_id),
            self.unrecorded.get(job_id),
        ):
            if lease is not None and (lease.claim.id, lease.claim.token) == (job_id, token):
                return lease
        return None

    def claimed(
        self, attempts: list[protocol.Row], now: float, at_once: bool = False
    ) -> list[ClaimedJob]:
        """It claimed these: it runs them all now (`at_once`), or the first now and the
        others in order after it. Returns them as claims."""
        claims = protocol.claims(attempts)
        leases = [Lease(claim, claim.expires_monotonic, now) for claim in claims]
        running = leases if at_once else leases[:1]
        self.running.update((lease.claim.id, lease) for lease in running)
        for lease in leases[len(running) :]:
            lease.start_recorded = False
            self.queued[lease.claim.id] = lease
        return claims

    def follow(self) -> int | None:
        """Catch up with its fence slot, once its messages are read: the queued attempt the
        slot names started, and the ones before it ended. Returns that attempt's id, and
        also a lost one's, which it must not have started; None if it started none."""
        if not (self.queued or self.lost):
            return None
        hold = self.slots[0].worker.read()
        if hold is None:
            return None  # a write in progress: the next pass reads it
        if hold.job in self.lost:
            return hold.job
        lease = self.queued.get(hold.job)
        if lease is None or token_key(lease.claim.token) != hold.token:
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
        lease = self.running.get(hold.job) or self.queued.get(hold.job)
        if whole:
            if lease is not None and token_key(lease.claim.token) == hold.token:
                self.advance(hold.job, hold.since)
            return
        if not self.queued:
            return  # no attempt in doubt: the one that ran ended as its messages said
        if lease is None:
            doubtful = [*self.running.values(), *self.queued.values()]
        else:
            self.advance(hold.job, hold.since)
            doubtful = [self.running[hold.job]]
        for each in doubtful:
            self.running.pop(each.claim.id, None)
            self.queued.pop(each.claim.id, None)
            self.unrecorded[each.claim.id] = each

    def advance(self, job_id: int, since: float) -> Lease | None:
        """It started this queued attempt, at `since`: every attempt it ran before it, that it
        reported nothing more of, completed with no result (see worker/reports.py). Returns
        the started one's lease; None if it was not queued."""
        if job_id not in self.queued:
            return None
        # A worker that queues attempts runs one at a time.
        for lease in list(self.running.values()):
            self.settling([named(lease)], since, {lease.claim.id: None})
        for queued_id in list(self.queued):
            lease = self.queued.pop(queued_id)
            lease.started = since
            if queued_id == job_id:
                self.running[job_id] = lease
                return lease
            self.running[queued_id] = lease
            self.settling([named(lease)], since, {queued_id: None})
        return None  # not reached: job_id is queued

    def settling(
        self, attempts: list[protocol.Named], now: float, completed: Mapping[int, str | None]
    ) -> None:
        """These attempts' code is done: their outcomes are being recorded. Those in
        `completed` completed, with these encoded results. One the master had taken for
        completed with no result, from the fence slot, gets its result now. An attempt it
        no longer holds is passed over."""
        for job_id, token in attempts:
            if self.holding(job_id, token) is None:
                continue
            self.advance(job_id, now)
            lease = self.running.pop(job_id, None) or self.completed.pop(job_id, None)
            if lease is None:
                continue
            lease.ended = lease.ended or now
            if job_id in completed:
                lease.claim = lease.claim.completed(completed[job_id])
                self.completed[job_id] = lease
            else:
                self.unrecorded[job_id] = lease
            self.ended(lease)

    def finished(self, job_id: int, token: str) -> Lease | None:
        """It acknowledged this attempt: the lease it ends, if the master still had it."""
        if self.holding(job_id, token) is None:
            return None
        self.advance(job_id, time.monotonic())
        lease = self.running.pop(job_id, None)
        if lease is not None:
            self.ended(lease)
            return lease
        return (
            self.completed.pop(job_id, None)
            or self.unrecorded.pop(job_id, None)
            or self.queued.pop(job_id, None)
        )

    def ended(self, lease: Lease) -> None:
        """The attempt of `lease` ended: a stop that was for it is over (its job's own SIGTERM
        handler ended it), and so is the SIGKILL that was to follow. The worker, told to
        drain when stopped, runs at most what it already claimed, then exits."""
        self.stopping.pop(lease.claim.id, None)
        if lease is self.stopped:
            self.stopped = self.stop_reason = self.kill_at = None

    def released(self, attempts: list[protocol.Named]) -> list[Lease]:
        """It gives these queued attempts back: the master no longer vouches for them.
        Returns the leases it held of them."""
        leases = []
        for job_id, token in attempts:
            lease = self.queued.get(job_id)
            if lease is not None and lease.claim.token == token:
                leases.append(self.queued.pop(job_id))
            # A lost one (master.lost) is no longer queued; it runs nothing now either.
            self.lost.discard(job_id)
        return leases
