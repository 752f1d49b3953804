"""The master's record of its workers: what each one holds and how it is being stopped."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable
from dataclasses import dataclass

import psutil

from ..records import ClaimedJob
from ..worker import attempt
from ..worker.fence import Hold, Slot, token_key
from ..worker.mark import SettlingMark
from .forking import Forked

# How long the master waits for a dead worker's attempt to be confirmed gone.
CONFIRM_KILL = 1.0


@dataclass
class Lease:
    """An attempt a worker holds, as the master fences it."""

    claim: ClaimedJob
    expires: float  # monotonic: the lease certainly lasts until then, never longer
    started: float  # monotonic: when the master learned of the claim

    def held_as(self, pid: int) -> Hold:
        """This attempt as the fence table writes it."""
        return Hold(pid, self.claim.id, token_key(self.claim.token), self.expires)


@dataclass
class WorkerProcess:
    process: Forked
    mark: SettlingMark
    slot: Slot  # its row of the fence table
    generation: int
    spawned: float
    ready: bool = False
    lease: Lease | None = None
    retiring: bool = False  # told to drain: it finishes its job, then exits
    stop_reason: str | None = None  # set once the master decided to stop it by signal
    kill_at: float | None = None  # when SIGKILL follows the SIGTERM already sent
    killed: bool = False
    jobs: int = 0

    @property
    def pid(self) -> int:
        return self.process.pid

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


def resident_memory(workers: Iterable[WorkerProcess]) -> list[int]:
    """Each live worker's resident set size, in bytes."""
    found = []
    for worker in workers:
        with contextlib.suppress(psutil.Error):
            found.append(psutil.Process(worker.pid).memory_info().rss)
    return found


def describe_exit(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    return f"exit code {code}" if code >= 0 else f"signal {signal.Signals(-code).name}"
