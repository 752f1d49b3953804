"""Signals reach the master's loop as a queue: handlers only record them and wake the loop.

Whatever a signal means is decided in the loop (Master.handle_<name>), never in a handler,
so no handler can interrupt the master halfway through changing its own state.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
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


class SignalQueue:
    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.pending: collections.deque[int] = collections.deque()

    def install(self) -> None:
        for signum in HANDLED:
            signal.signal(signum, self.record)

    def record(self, signum: int, frame: FrameType | None) -> None:
        self.pending.append(signum)
        with contextlib.suppress(BlockingIOError):  # a full pipe: the loop is awake already
            os.write(self.write_fd, b"!")

    def take(self) -> list[signal.Signals]:
        """Clear the wake-ups and return the signals received since the last call, in order."""
        with contextlib.suppress(BlockingIOError):
            while os.read(self.read_fd, 4096):
                pass
        taken = []
        while self.pending:
            taken.append(signal.Signals(self.pending.popleft()))
        return taken

    def fds(self) -> tuple[int, int]:
        return self.read_fd, self.write_fd
