"""The processes a concurrent worker's attempt leaves running, killed before its outcome is
recorded, as a process worker kills its attempt's (worker/settling.py): a failed attempt is
retried, and a concurrency slot is given to the next attempt, only once the attempt's code
has stopped, the processes it started included.

A process worker may kill every process it started but its own; a concurrent one must tell
its attempts' processes apart. A process is an attempt's when:
- the attempt's thread started it, or a thread of the worker's executor running work the
  attempt handed it (one thread runs one attempt's work at a time);
- the attempt started it through asyncio's subprocess API (handoff.AttemptLoop records it);
- it descends from one of those.

What is left cannot be placed: a process a coroutine started on the event loop's thread
without asyncio's API, and a daemon that left its parent (it carries the worker's mark, and
the master, the subreaper, is its parent now). When an attempt that started processes ends
and such strays run, they are its own if no other attempt in flight started any process, and
are killed with its own. Otherwise the worker stops with all its attempts rather than let a
stray outlive its attempt's outcome; they are settled as a crashed worker's are.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

import psutil

from ..attempt import (
    CONFIRM_POLL,
    GONE,
    Processes,
    marked,
    own_children,
    read_proc,
    running,
    started,
)
from .inflight import Attempt, InFlight

# How long the kill of an attempt's processes may take to be confirmed.
CONFIRM = 2.0


class Unattributable(Exception):
    """Processes run that could be any of several attempts': the worker must stop."""


def descendants(pids: set[int]) -> set[int]:
    found = set(pids)
    for pid in pids:
        with contextlib.suppress(*GONE):
            found.update(child.pid for child in psutil.Process(pid).children(recursive=True))
    return {pid for pid in found if running(pid)}


def escapees(master: int, own: Processes) -> set[int]:
    """The running processes that carry this worker's mark and have left it for the master:
    daemons its jobs started."""
    me = os.getpid()
    try:
        listed = read_proc(f"/proc/{master}/task/{master}/children")
    except FileNotFoundError:
        return set()
    found = set()
    for pid in map(int, listed.split()):
        with contextlib.suppress(*GONE):
            if pid != me and marked(pid, me) and running(pid) and (pid, started(pid)) not in own:
                found.add(pid)
    return found


def processes_of(attempt: Attempt, inflight: InFlight, master: int, own: Processes) -> set[int]:
    """The running processes that `attempt`, which has ended, left behind: its own and the
    strays that can only be its. Raises Unattributable when strays could be another's."""
    owners = inflight.owners()
    placed = descendants(set(owners))
    mine = descendants({pid for pid, owner in owners.items() if owner is attempt})
    strays = escapees(master, own)
    if attempt.unattributed:
        strays |= {pid for pid in own_children() if (pid, started(pid)) not in own}
    strays = descendants(strays) - placed
    if strays and inflight.others_spawned(attempt):
        raise Unattributable(sorted(strays))
    return mine | strays


def kill_confirmed(pids: set[int]) -> bool:
    """SIGKILL these processes until none of them runs; False if some still ran after
    CONFIRM (a process stuck in the kernel cannot be killed sooner). Each is named by its
    start as well as its pid, so that a pid reused meanwhile is spared."""
    targets = {(pid, start) for pid in pids if (start := started(pid)) is not None}
    deadline = time.monotonic() + CONFIRM
    while True:
        targets = {(pid, start) for pid, start in targets if started(pid) == start and running(pid)}
        if not targets:
            return True
        if time.monotonic() >= deadline:
            return False
        for pid, _ in targets:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(CONFIRM_POLL)
