"""The worker classes, one per concurrency model, as gunicorn has its sync and threaded
workers: the process worker (child.py) runs one attempt at a time, --prefetch or not; the
concurrent worker (concurrent/) runs up to --concurrency attempts at once, coroutines on its
event loop and plain jobs in its threads."""

from __future__ import annotations

import socket

from .child import Child
from .concurrent.loop import ConcurrentChild
from .fence import Slot
from .mark import SettlingMark
from .settings import WorkerSettings


def worker_for(
    settings: WorkerSettings, sock: socket.socket, mark: SettlingMark, rows: list[Slot]
) -> Child:
    """The worker its settings ask for, given its fence rows (one per attempt at once)."""
    if settings.concurrency > 1:
        return ConcurrentChild(settings, sock, mark, rows)
    return Child(settings, sock, mark, rows)
