"""What a worker child tells its master of the attempts it holds, in messages and in its row of
the fence table, and the one attempt it runs, which the process title shows.

The master tracks every lease from these reports: a claim's attempts as soon as they exist
(the first runs at once), each queued one as it starts, the ends, and the queued ones given
back. The fence slot always names the attempt that runs, so the keeper fences exactly it.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Sequence

from .. import protocol, wire
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

    def claimed(self, claims: list[ClaimedJob]) -> list[ClaimedJob]:
        """Tell the master of a claim's attempts, fenced on the first, which runs now."""
        if claims:
            self.hold(claims[0])
            # Before decoding or running anything: from here on the master renews them.
            wire.send(self.sock, protocol.Claimed(protocol.attempts(claims)))
        return claims

    def starting(self, claim: ClaimedJob, after: Sequence[ClaimedJob]) -> None:
        """A queued attempt runs now: fenced on it, and the master told so, and given the
        result of the one `after` it, if that completed."""
        self.hold(claim)
        wire.send(self.sock, protocol.Started(claim.id, protocol.carried(after)))

    def releasing(self, claims: Sequence[ClaimedJob]) -> None:
        """Queued attempts go back unstarted: the master stops vouching for them first."""
        wire.send(self.sock, protocol.Releasing([claim.id for claim in claims]))

    def ended(self, ended: Ended, then: list[ClaimedJob] | None = None) -> None:
        """Report attempts' ends, and the attempts their acknowledgement claimed, if any, in
        one message: the master swaps the old leases for the new, and the worker is fenced
        on the first new one, which runs now."""
        outcomes = [(claim.id, str(outcome)) for claim, outcome in ended]
        if then:
            self.hold(then[0])
            wire.send(self.sock, protocol.Finished(outcomes, protocol.attempts(then)))
        else:
            self.slot.worker.write(EMPTY)
            with self.lock:
                self.current = None
            wire.send(self.sock, protocol.Finished(outcomes))
        # Only now: the master reads the mark after the messages, so it never sees the mark
        # cleared while it still believes the attempt is running.
        self.mark.clear()

    def hold(self, claim: ClaimedJob) -> None:
        """Make `claim` the one this process is fenced on."""
        key = token_key(claim.token)
        self.slot.worker.write(Hold(os.getpid(), claim.id, key, claim.expires_monotonic))
        with self.lock:
            self.current, self.started = claim, time.monotonic()

    def vouched_until(self, claims: Sequence[ClaimedJob], safety_margin: float) -> float:
        """The earliest end of these attempts' leases as this worker knows them (the claim,
        or the master's last extension in the fence table), less the safety margin."""
        extension = self.slot.master.read()
        ends = []
        for claim in claims:
            expires = claim.expires_monotonic
            mine = Hold(os.getpid(), claim.id, token_key(claim.token), expires)
            if extension is not None and mine.same_attempt(extension):
                expires = max(expires, extension.expires)
            ends.append(expires)
        return min(ends) - safety_margin

    def show(self) -> None:
        """Set the process title to the attempt being run."""
        with self.lock:
            title.state(self.current, self.started)
