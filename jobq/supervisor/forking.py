"""Forking the master's processes: workers, the renewer and the housekeeper.

The master is single-threaded on purpose: a fork copies only the calling thread, so a lock
held by any other thread (an import, a driver's) would stay locked forever in the child.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import logs, tracing, wire
from ..worker.fence import die_with
from .signals import HANDLED

log = logging.getLogger("jobq")

# A terminal sends these to its foreground process group; they are the master's to act on.
# Every child leads a group of its own (so that a worker's whole attempt can be signalled at
# once), which keeps them out of the terminal's group too: ignoring them is the second line.
# The same keeps a SIGTERM sent to the master's whole group (`timeout`, `kill -TERM -<pgid>`)
# from reaching workers and helpers: the master alone drains. (systemd's default
# KillMode=control-group signals every process of the unit, group or not: the unit in
# deploy/systemd uses KillMode=mixed.)
IGNORED_IN_CHILD = (signal.SIGINT, signal.SIGHUP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGQUIT)
# SIGTERM stops a child at once (fencing, timeouts, shutdown); jobs may use SIGALRM.
DEFAULT_IN_CHILD = (signal.SIGTERM, signal.SIGALRM, signal.SIGCHLD)


PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> None:
    """Make this process the child subreaper of everything it forks: a process that leaves
    its worker's group and outlives its parent (a double-forked daemon) is reparented here,
    not to init, where the master reaps it and a worker can still find it."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


@dataclass
class Forked:
    """A process the master forked, and the master's end of the socket to it."""

    pid: int
    pidfd: int
    sock: socket.socket
    outbox: wire.Outbox = field(init=False)  # what the master sends it goes through here

    def __post_init__(self) -> None:
        self.outbox = wire.Outbox(self.sock)

    def signal(self, signum: signal.Signals) -> None:
        """Signal it through its pidfd, which names this process alone: even a reused pid
        could not redirect the signal (and ours are not reused before we reap them)."""
        with contextlib.suppress(ProcessLookupError):  # exited already: the reaper will see
            signal.pidfd_send_signal(self.pidfd, signum)

    def close(self) -> None:
        """Idempotent: a number closed twice could be another descriptor's by then (in a
        child forked meanwhile, the socket it was given)."""
        self.sock.close()
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1


STDERR = 2


def close_all_but(keep: set[int]) -> None:
    """Close every descriptor of the master's but `keep`: a child holds nothing of the
    master's it does not use (a listener, a scrape's connection, a sibling's socket), even
    what the let_go list could have missed. A keep-list, not a denylist, so that whatever
    the master opens later is covered too. The master's own descriptors are all
    close-on-exec (Python's default); an inheritable one was handed to the supervisor by
    whoever started it (`3>>jobs.log`), for its jobs, and is kept, as are the standard
    three. The open ones are listed, not every number up to the limit (a million, often)."""
    try:
        open_now = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        open_now = list(range(3, os.sysconf("SC_OPEN_MAX")))
    for fd in open_now:
        if fd > STDERR and fd not in keep:
            with contextlib.suppress(OSError):  # the listing's own, closed already
                if not os.get_inheritable(fd):
                    os.close(fd)


def fork(
    body: Callable[[socket.socket], int],
    let_go: Callable[[], None],
    dies_with_master: bool = True,
) -> Forked:
    """Run body(socket) in a new child process, the leader of its own process group, that
    dies with the master (unless told otherwise: the fence keeper outlives it on purpose).

    let_go runs first in the child, to close what it inherited of the master's; then every
    other descriptor is closed but the child's socket and the log's. A failed fork raises
    OSError, the master's signal mask restored.
    """
    master_end, child_end = wire.pair()
    master_pid = os.getpid()
    # Anything still buffered would be written a second time by the child.
    sys.stdout.flush()
    sys.stderr.flush()
    # A signal landing between fork and the handler reset would run the master's handler in
    # the child, so handled signals wait until the child has its own dispositions.
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
    # The heap the child inherits goes into the collector's permanent generation: the
    # child's collections never walk it, so they never write to its pages, which stay
    # shared with the master instead of being copied into every child (issue 60). The
    # master takes its heap back at once: frozen there, its garbage would never be freed.
    gc.freeze()
    try:
        pid = os.fork()
    except OSError:
        # EAGAIN under a pids limit, ENOMEM: an outage the caller waits out, with the
        # master's signals working as before.
        gc.unfreeze()
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        master_end.close()
        child_end.close()
        raise
    if pid != 0:
        gc.unfreeze()
    if pid == 0:
        code = 1
        try:
            for signum in IGNORED_IN_CHILD:
                signal.signal(signum, signal.SIG_IGN)
            # Until it leads its own group, a child is in the master's, where `timeout`,
            # `kill -TERM -<pgid>` or a terminal may signal it. What was sent to the group
            # is the master's to act on: ignoring SIGTERM discards one already pending.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            os.setpgid(0, 0)
            for signum in DEFAULT_IN_CHILD:
                signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            if dies_with_master:
                die_with(master_pid)
            master_end.close()
            let_go()
            close_all_but({child_end.fileno(), *logs.descriptors()})
            code = body(child_end)
        except BaseException:
            log.exception("Process %d failed", os.getpid())
        finally:
            tracing.flush()
            logs.flush()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    # Both sides set the group, so that it is set before either goes on: the master may
    # signal the group at once.
    with contextlib.suppress(OSError):  # it exited already
        os.setpgid(pid, pid)
    signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    child_end.close()
    master_end.setblocking(False)
    return Forked(pid, os.pidfd_open(pid), master_end)
