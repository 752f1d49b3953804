"""This process's id, read once and again in each child forked from it.

os.getpid() is a system call every time (glibc no longer caches it), and a worker asked for
it several times per job: to hold an attempt in its fence slot, to name its claims, to
look for leftover processes. A child forked by os.fork (the supervisor's workers, a
multiprocessing pool's) runs the hook below before any of its own code."""

from __future__ import annotations

import os

_pid = os.getpid()


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)


def getpid() -> int:
    """os.getpid(), without the system call."""
    return _pid
