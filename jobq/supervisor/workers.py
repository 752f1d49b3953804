"""A worker process as the master knows it: its process, its shared memory, and the attempts
it holds. With --prefetch a worker holds several: the one it runs (the only one fencing is
about), the ones it claimed with it and has not started, and the ones it completed and has
not acknowledged yet. The master renews them all, and knows which is which from the worker's
messages (see protocol.py)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
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

    def held_as(self, pid: int) -> Hold:
        """This attempt as the fence table writes it."""
        return Hold(pid, self.claim.id, token_key(self.claim.token), self.expires)


@dataclass
class WorkerProcess:
    process: Forked
    mark: SettlingMark
    slot: Slot  # its row of the fence table
    worker_id: str  # what every row it claims is marked with (see running.worker_id)
    generation: int
    spawned: float
    ready: bool = False
    lease: Lease | None = None  # the attempt it runs
    # Attempts it claimed with that one (--prefetch) and has not started, in order.
    queued: dict[int, Lease] = field(default_factory=dict)
    # Attempts it ran to completion and has not acknowledged yet: it acknowledges them
    # together, with its next claim.
    completed: dict[int, Lease] = field(default_factory=dict)
    # Queued attempts a renewal round did not extend: another attempt may own their jobs.
    lost: set[int] = field(default_factory=set)
    retiring: bool = False  # told to drain: it finishes its job, then exits
    stop_reason: StopReason | None = None  # set once the master decided to stop it by signal
    kill_at: float | None = None  # when SIGKILL follows the SIGTERM already sent
    stopped: Lease | None = None  # the attempt that SIGTERM stops, if it was for one
    killed: bool = False
    jobs: int = 0

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def busy(self) -> bool:
        return self.lease is not None or bool(self.queued) or bool(self.completed)

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
        if self.lease is None:
            attempt.kill(self.pid)  # nothing should be left; make sure, cheaply
            return True
        return attempt.kill_and_confirm(self.pid, CONFIRM_KILL)

    def fenced_by_keeper(self) -> bool:
        """Whether the fence keeper killed it for the attempt it held."""
        if self.lease is None:
            return False
        return self.lease.held_as(self.pid).same_attempt(self.slot.keeper.read())

    # -- its attempts, as its messages tell them -------------------------------------------

    def leases(self) -> Iterator[Lease]:
        """Every attempt the master vouches for: the running one, unless the worker is being
        stopped, and its queued and completed ones, which run no code."""
        if self.lease is not None and self.stop_reason is None:
            yield self.lease
        yield from self.queued.values()
        yield from self.completed.values()

    def holding(self, job_id: int, token: str) -> Lease | None:
        """Its lease of that attempt, if it still holds it."""
        for lease in (self.lease, self.queued.get(job_id), self.completed.get(job_id)):
            if lease is not None and (lease.claim.id, lease.claim.token) == (job_id, token):
                return lease
        return None

    def claimed(self, attempts: list[protocol.Attempt], now: float) -> None:
        """It claimed these: it runs the first now, and queues the others."""
        leases = [Lease(each.claim(), each.expires_monotonic, now) for each in attempts]
        self.lease = leases[0]
        self.queued.update((lease.claim.id, lease) for lease in leases[1:])

    def started(self, job_id: int, now: float) -> Lease | None:
        """It started a queued attempt: the one it ran before completed (a failed one was
        acknowledged by then). Returns the started attempt's lease, None if it was lost."""
        if self.lease is not None:
            self.completed[self.lease.claim.id] = self.lease
            self.lease.ended = now
            self.ended(self.lease)
        self.lease = self.queued.pop(job_id, None)
        if self.lease is not None:
            self.lease.started = now
        return self.lease

    def finished(self, job_id: int) -> Lease | None:
        """It acknowledged this attempt: the lease it ends, if the master still had it."""
        if self.lease is not None and self.lease.claim.id == job_id:
            lease, self.lease = self.lease, None
            self.ended(lease)
            return lease
        return self.completed.pop(job_id, None) or self.queued.pop(job_id, None)

    def ended(self, lease: Lease) -> None:
        """The attempt of `lease` ended: a stop that was for it is over (its job's own SIGTERM
        handler ended it), and so is the SIGKILL that was to follow. The worker, told to
        drain when stopped, runs at most what it already claimed, then exits."""
        if lease is self.stopped:
            self.stopped = self.stop_reason = self.kill_at = None

    def released(self, job_ids: list[int]) -> list[Lease]:
        """It gives these queued attempts back: the master no longer vouches for them.
        Returns the leases it held of them."""
        leases = []
        for job_id in job_ids:
            lease = self.queued.pop(job_id, None)
            if lease is not None:
                leases.append(lease)
            self.lost.discard(job_id)
        return leases
