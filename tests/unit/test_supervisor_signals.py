"""The master's reading of stop requests, without a master: an echo of one request is that
request."""

from __future__ import annotations

import os
import signal

from jobq.supervisor.signals import ECHO, SignalQueue


def test_a_stop_request_repeated_within_echo_is_taken_once() -> None:
    queue = SignalQueue()
    try:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGHUP):
            queue.record(signum, None)
        # Only stop requests have echoes: each HUP is a reload of its own.
        assert queue.take() == [signal.SIGTERM, signal.SIGHUP, signal.SIGHUP]
        queue.pending.append((signal.SIGTERM, queue.last_stop + ECHO))
        assert queue.take() == [signal.SIGTERM], "a later one is the second request"
    finally:
        for fd in queue.fds():
            os.close(fd)
