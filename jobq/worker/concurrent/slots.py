"""A concurrent worker's slots: how many attempts it may run at once, and the fence row each
running attempt holds (see worker/fence.py), so that the keeper fences every attempt on its
own lease, exactly as it fences a process worker's one attempt."""

from __future__ import annotations

from ...pid import getpid
from ...records import ClaimedJob
from ..fence import EMPTY, Hold, Slot, token_key


class Slots:
    def __init__(self, rows: list[Slot]) -> None:
        self.rows = rows
        self.free = list(reversed(rows))
        self.held: dict[int, tuple[ClaimedJob, Slot]] = {}

    @property
    def capacity(self) -> int:
        return len(self.rows)

    @property
    def busy(self) -> int:
        return len(self.held)

    @property
    def vacant(self) -> int:
        return len(self.free)

    def claims_paused(self) -> bool:
        return self.rows[0].claims_paused()

    def hold(self, claim: ClaimedJob) -> None:
        """Fence the worker on `claim` in a free row: before its claim is reported, as a
        process worker fences itself before its report."""
        if not self.free:
            raise RuntimeError(f"no free slot for job {claim.id}: all {self.capacity} are busy")
        row = self.free.pop()
        key = token_key(claim.token)
        row.worker.write(Hold(getpid(), claim.id, key, claim.expires_monotonic))
        self.held[claim.id] = (claim, row)

    def let_go(self, claim: ClaimedJob) -> None:
        """The attempt runs no more code: its row is free for the next claim."""
        _, row = self.held.pop(claim.id)
        row.worker.write(EMPTY)
        self.free.append(row)

    def running(self) -> list[ClaimedJob]:
        """The attempts it runs, oldest first. Also read by the title's thread: list() of a
        dict's values copies it in one step under the GIL."""
        return [claim for claim, _ in list(self.held.values())]
