"""A listening socket in the master's loop that no accept() error can take down.

accept() fails for reasons of the whole process (EMFILE and ENFILE at the file limits,
ENOBUFS, ENOMEM) and of one client (ECONNABORTED, EPROTO, EPERM from a firewall). None may end
the master: a metrics port any client can reach would be a way to stop the supervisor, whose
workers then fence themselves. Each error is counted and, the first of a run, logged; the
listener then leaves the selector for a while, doubling up to MOST_PAUSE, since it stays
readable while clients wait in the backlog and would spin the loop. The kernel's backlog
keeps those clients until it listens again.
"""

from __future__ import annotations

import logging
import selectors
import socket
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("jobq")

FIRST_PAUSE = 0.05
MOST_PAUSE = 1.0


class Listener:
    """`sock`, listening and non-blocking, registered in `selector` with `data` whenever it
    may accept: not after an error, until its pause ends (tend()), nor while its owner is
    full (set_full())."""

    def __init__(
        self,
        selector: selectors.BaseSelector,
        sock: socket.socket,
        data: Any,
        name: str,
        counted: Callable[[], None],
    ) -> None:
        self.selector = selector
        self.sock = sock
        self.data = data
        self.name = name
        self.counted = counted
        self.pause = FIRST_PAUSE
        self.paused_until: float | None = None
        self.full = False
        self.registered = False
        self.update()

    def accept(self) -> socket.socket | None:
        """The next client, or None: none waits, or accept() failed (counted, and paused)."""
        try:
            sock, _ = self.sock.accept()
        except BlockingIOError:
            return None
        except OSError as error:
            self.counted()
            if self.pause == FIRST_PAUSE:
                log.warning(
                    "The %s listener cannot accept a connection (%s): it pauses, up to %g s "
                    "at a time, until it can",
                    self.name,
                    error.strerror or error,
                    MOST_PAUSE,
                )
            self.paused_until = time.monotonic() + self.pause
            self.pause = min(self.pause * 2, MOST_PAUSE)
            self.update()
            return None
        self.pause = FIRST_PAUSE
        return sock

    def set_full(self, full: bool) -> None:
        """Whether the owner holds as many connections as it may: then it accepts none."""
        self.full = full
        self.update()

    def due(self) -> float:
        """When the pause after an error ends."""
        return float("inf") if self.paused_until is None else self.paused_until

    def tend(self, now: float) -> None:
        if self.paused_until is not None and now >= self.paused_until:
            self.paused_until = None
            self.update()

    def update(self) -> None:
        listening = self.paused_until is None and not self.full
        if listening and not self.registered:
            self.selector.register(self.sock, selectors.EVENT_READ, self.data)
        elif self.registered and not listening:
            self.selector.unregister(self.sock)
        self.registered = listening

    def close(self) -> None:
        if self.registered:
            self.selector.unregister(self.sock)
            self.registered = False
        self.sock.close()
