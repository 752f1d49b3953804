"""The fence keeper: a process of the master's that kills every attempt nobody vouches for.

It reads the fence table (see worker/fence.py) and, when an attempt's kill point passes
(the later of the worker's own lease end and the master's last confirmed extension, minus
the safety margin and the fence lead), kills the attempt's every process. It needs no
database and no cooperation: it goes on when the master is frozen, and when a job holds its
worker's GIL. When the master dies it kills every attempt still held, then exits, so that
nothing a job started outlives the supervisor.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import time
from collections.abc import Iterator

from setproctitle import setproctitle

from .. import lease_clock
from ..worker import attempt
from ..worker.fence import FenceTable, Hold, Section, Slot

log = logging.getLogger("jobq")

# How often the table is read for attempts that began or were extended meanwhile. A new
# attempt's kill point is seconds away (the timing rule), so this is no source of lateness.
POLL = 0.05
# How long one attempt's kill may take to be confirmed before the keeper moves on.
CONFIRM = 1.0


class Keeper:
    def __init__(self, table: FenceTable, safety_margin: float) -> None:
        self.table = table
        self.safety_margin = safety_margin
        # The last whole value read from each section, for when a read races a write.
        self.last: dict[int, Hold] = {}
        self.fenced: set[tuple[int, Hold]] = set()

    def read(self, section: Section) -> Hold | None:
        value = section.read()
        if value is None:
            return self.last.get(section.offset)
        self.last[section.offset] = value
        return value

    def held(self) -> Iterator[tuple[Slot, Hold, float]]:
        """(slot, the attempt its worker holds, that attempt's kill point)."""
        for slot in self.table.slots():
            hold = self.read(slot.worker)
            if hold is None or hold.job == 0:
                continue
            expires = hold.expires
            extension = self.read(slot.master)
            if extension is not None and hold.same_attempt(extension):
                expires = max(expires, extension.expires)
            yield slot, hold, lease_clock.kill_point(expires, self.safety_margin)

    def fence_due(self, now: float) -> float:
        """Fence every attempt whose kill point has passed; the next kill point."""
        due = now + POLL
        for slot, hold, point in self.held():
            if now < point:
                due = min(due, point)
            elif (slot.index, hold) not in self.fenced:
                self.fenced.add((slot.index, hold))
                log.error(
                    "Lease of job %d was not renewed in time: killing worker %d and every "
                    "process of its attempt",
                    hold.job,
                    hold.pid,
                    extra={"event": "self_fenced", "job_id": hold.job},
                )
                self.fence(slot, hold)
        return due

    def fence(self, slot: Slot, hold: Hold) -> None:
        # Marked first: the master, reaping the worker, reads why it died here.
        slot.keeper.write(hold)
        if not attempt.kill_and_confirm(hold.pid, CONFIRM):
            log.error(
                "Worker %d's attempt at job %d still has processes running after SIGKILL",
                hold.pid,
                hold.job,
                extra={"event": "kill_unconfirmed", "job_id": hold.job},
            )

    def fence_all(self) -> None:
        for slot, hold, _ in self.held():
            self.fence(slot, hold)


def serve(table: FenceTable, safety_margin: float, master: int, sock: socket.socket) -> int:
    """Keep the fences until the master dies or closes the socket; then kill what is held."""
    setproctitle("jobq-supervise: fence keeper")
    keeper = Keeper(table, safety_margin)
    try:
        watched = [sock.fileno(), os.pidfd_open(master)]
    except ProcessLookupError:
        watched = []  # the master is gone already
    if os.getppid() != master:
        watched = []  # the master died before the pidfd was opened: we were reparented
    while watched:
        now = time.monotonic()
        pause = keeper.fence_due(now) - now
        # A pidfd turns readable when its process exits; the socket when the master closes it.
        readable, _, _ = select.select(watched, [], [], max(0.0, pause))
        if readable:
            break
    keeper.fence_all()
    return 0
