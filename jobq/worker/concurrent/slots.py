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

    @property
    def capacity(self) -> int:
        return len(self.rows)

    @property
    def busy(self) -> int:
        return len(self.rows) - len(self.free)

    @property
    def vacant(self) -> int:
        return len(self.free)

    def claims_paused(self) -> bool:
        return self.rows[0].claims_paused()

    def hold(self, claim: ClaimedJob) -> Slot:
        """Fence the worker on `claim` in a free row: before its claim is reported, as a
        process worker fences itself before its report."""
        if not self.free:
            raise RuntimeError(f"no free slot for job {claim.id}: all {self.capacity} are busy")
        row = self.free.pop()
        row.worker.write(Hold(getpid(), claim.id, token_key(claim.token), claim.expires_monotonic))
        return row

    def let_go(self, row: Slot) -> None:
        """Its attempt runs no more code, nor any process it started: the row is free for
        the next claim."""
        row.worker.write(EMPTY)
        self.free.append(row)
