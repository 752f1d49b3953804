"""Forking the master's processes: workers, the renewer and the housekeeper.

The master is single-threaded on purpose: a fork copies only the calling thread, so a lock
held by any other thread (an import, a driver's) would stay locked forever in the child.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass

from .. import protocol
from ..worker.fence import die_with
from .signals import HANDLED

log = logging.getLogger("jobq")

# A terminal sends these to the whole process group; they are the master's to act on.
IGNORED_IN_CHILD = (signal.SIGINT, signal.SIGHUP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGQUIT)
# SIGTERM stops a child at once (fencing, timeouts, shutdown); SIGALRM is its self-fence.
DEFAULT_IN_CHILD = (signal.SIGTERM, signal.SIGALRM, signal.SIGCHLD)


@dataclass
class Forked:
    """A process the master forked, and the master's end of the socket to it."""

    pid: int
    pidfd: int
    sock: socket.socket

    def signal(self, signum: signal.Signals) -> None:
        """Signal it through its pidfd, which names this process alone: even a reused pid
        could not redirect the signal (and ours are not reused before we reap them)."""
        with contextlib.suppress(ProcessLookupError):  # exited already: the reaper will see
            signal.pidfd_send_signal(self.pidfd, signum)

    def close(self) -> None:
        self.sock.close()
        os.close(self.pidfd)


def fork(body: Callable[[socket.socket], int], let_go: Callable[[], None]) -> Forked:
    """Run body(socket) in a new child process that dies with the master.

    let_go runs first in the child, to close what it inherited of the master's.
    """
    master_end, child_end = protocol.pair()
    master_pid = os.getpid()
    # Anything still buffered would be written a second time by the child.
    sys.stdout.flush()
    sys.stderr.flush()
    # A signal landing between fork and the handler reset would run the master's handler in
    # the child, so handled signals wait until the child has its own dispositions.
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for signum in IGNORED_IN_CHILD:
                signal.signal(signum, signal.SIG_IGN)
            for signum in DEFAULT_IN_CHILD:
                signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            die_with(master_pid)
            master_end.close()
            let_go()
            code = body(child_end)
        except BaseException:
            log.exception("Process %d failed", os.getpid())
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    child_end.close()
    master_end.setblocking(False)
    return Forked(pid, os.pidfd_open(pid), master_end)
