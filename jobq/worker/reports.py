"""What a worker child tells its master of the attempts it holds, in messages and in its row of
the fence table, and the one attempt it runs, which the process title shows.

The master tracks every lease from these reports: a claim's attempts as soon as they exist
(the first runs at once), the ends, and the queued ones given back. The fence slot always
names the attempt that runs, so the keeper fences exactly it, and it is also how the master
learns that a queued attempt started: no message per start (see workers.WorkerProcess.follow).

That takes one rule, which every report here keeps: whatever the master must know of an
attempt is in the socket before the slot names a later attempt. So once the master has read
a worker's messages, an attempt of the claim before the one its slot names either was
reported (failed, or completed with a result, in a message of its own) or completed with
no result. A start then costs a write to shared memory, not a send that wakes the master:
with short jobs, that send was a quarter of a worker's wall time (bench/RESULTS.md).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Sequence

from .. import protocol, wire
from ..pid import getpid
from ..records import ClaimedJob
from . import title
from .fence import EMPTY, Hold, Slot, token_key
from .mark import SettlingMark

# Attempts ended, with how, as the master is told of them.
Ended = Sequence[tuple[ClaimedJob, str]]


class Reports:
    def __init__(self, sock: socket.socket, slot: Slot, mark: SettlingMark) -> None:
        self.sock = sock
        self.slot = slot
        self.mark = mark
        # The attempt being run, shared with the thread that shows it in the process title.
        self.lock = threading.Lock()
        self.current: ClaimedJob | None = None
        self.started = 0.0
        # How long the attempts not reported ended yet ran, by job id.
        self.ran: dict[int, float] = {}

    def claimed(self, claims: list[ClaimedJob]) -> list[ClaimedJob]:
        """Tell the master of a claim's attempts, fenced on the first, which runs now."""
        if claims:
            self.hold(claims[0])
            # Before decoding or running anything: from here on the master renews them.
            wire.send(self.sock, protocol.Claimed(protocol.attempts(claims)))
        return claims

    def starting(self, claim: ClaimedJob, after: Sequence[ClaimedJob]) -> None:
        """A queued attempt runs now: fenced on it. `after`: the one before it, if that
        completed; a result of its goes to the master first (the rule above), and so does
        the news that it has one too large to carry (the master then leaves it to
        maintenance should the worker die)."""
        done = [each for each in after if each.result is not None]
        if done:
            wire.send(self.sock, protocol.Settling(protocol.named(done), protocol.carried(done)))
        self.hold(claim)

    def releasing(self, claims: Sequence[ClaimedJob]) -> None:
        """Queued attempts go back unstarted: the master stops vouching for them first."""
        wire.send(self.sock, protocol.Releasing(protocol.named(claims)))

    def ended(self, ended: Ended, then: list[ClaimedJob] | None = None) -> None:
        """Report attempts' ends, and the attempts their acknowledgement claimed, if any, in
        one message: the master swaps the old leases for the new, and the worker is fenced
        on the first new one, which runs now."""
        outcomes = [(claim.id, claim.token, str(outcome)) for claim, outcome in ended]
        ran = [self.ran.pop(claim.id, None) for claim, _ in ended]
        if then:
            self.hold(then[0])
            wire.send(self.sock, protocol.Finished(outcomes, protocol.attempts(then), ran=ran))
        else:
            self.slot.worker.write(EMPTY)
            with self.lock:
                self.current = None
            wire.send(self.sock, protocol.Finished(outcomes, ran=ran))
        # Only now: the master reads the mark after the messages, so it never sees the mark
        # cleared while it still believes the attempt is running.
        self.mark.clear()

    def hold(self, claim: ClaimedJob) -> None:
        """Make `claim` the one this process is fenced on."""
        key = token_key(claim.token)
        now = time.monotonic()
        self.slot.worker.put(getpid(), claim.id, key, claim.expires_monotonic, now)
        with self.lock:
            self.current, self.started = claim, now

    def timed(self, claim: ClaimedJob, seconds: float) -> None:
        """How long an attempt's code ran, for the master's metrics when it ends."""
        self.ran[claim.id] = seconds

    def vouched_until(self, claims: Sequence[ClaimedJob], safety_margin: float) -> float:
        """The earliest end of these attempts' leases as this worker knows them (the claim,
        or the master's last extension in the fence table), less the safety margin."""
        extension = self.slot.master.read()
        ends = []
        for claim in claims:
            expires = claim.expires_monotonic
            mine = Hold(getpid(), claim.id, token_key(claim.token), expires)
            if extension is not None and mine.same_attempt(extension):
                expires = max(expires, extension.expires)
            ends.append(expires)
        return min(ends) - safety_margin

    def show(self) -> None:
        """Set the process title to the attempt being run."""
        with self.lock:
            title.state(self.current, self.started)
