"""The master's record of its workers: what each one holds and how it is being stopped."""

from __future__ import annotations

from dataclasses import dataclass

from ..records import ClaimedJob
from ..worker.fence import Hold, Slot, token_key
from ..worker.mark import SettlingMark
from .forking import Forked


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
