"""Signals reach the master's loop as a queue: handlers only record them and wake the loop.

Whatever a signal means is decided in the loop (Master.handle_<name>), never in a handler,
so no handler can interrupt the master halfway through changing its own state.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import time
from types import FrameType

HANDLED = (
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGTTIN,
    signal.SIGTTOU,
    signal.SIGCHLD,
)

# The stop requests. `timeout` sends its signal to the command and then to the command's
# process group, which the master is in, and a group signal may come on top of one sent to
# the master: one request can arrive twice, moments apart. A repeat this soon after the
# first is taken as that echo, not as the second request that stops at once.
STOPS = (signal.SIGTERM, signal.SIGINT)
ECHO = 1.0


class SignalQueue:
    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.pending: collections.deque[tuple[int, float]] = collections.deque()
        self.last_stop = float("-inf")  # monotonic: when the last stop request came

    def install(self) -> None:
        for signum in HANDLED:
            signal.signal(signum, self.record)

    def record(self, signum: int, frame: FrameType | None) -> None:
        self.pending.append((signum, time.monotonic()))
        with contextlib.suppress(BlockingIOError):  # a full pipe: the loop is awake already
            os.write(self.write_fd, b"!")

    def take(self) -> list[signal.Signals]:
        """Clear the wake-ups and return the signals received since the last call, in order,
        without the echoes of a stop request."""
        with contextlib.suppress(BlockingIOError):
            while os.read(self.read_fd, 4096):
                pass
        taken = []
        while self.pending:
            signum, at = self.pending.popleft()
            if signum in STOPS:
                if at - self.last_stop < ECHO:
                    continue
                self.last_stop = at
            taken.append(signal.Signals(signum))
        return taken

    def fds(self) -> tuple[int, int]:
        return self.read_fd, self.write_fd
