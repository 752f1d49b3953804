"""How a child makes sure it never outlives its lease, whatever happens to its master.

Two kernel mechanisms, neither of which needs the master or the GIL to fire:
- PR_SET_PDEATHSIG: the kernel kills the child when the master dies.
- An ITIMER_REAL timer armed to the lease's end minus the safety margin, with SIGALRM at its
  default action (terminate). Each extension the master confirms re-arms it; a frozen master
  confirms none, so the child dies before its lease can end.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1

# A kill is not instant: the process is scheduled, torn down and reaped. Fences act this much
# before the moment a worker must be gone, so that it is gone by then, not just signalled.
FENCE_LEAD = 0.1


def die_with(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when `parent_pid` (our parent) goes away."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    # The parent may have died before prctl took effect: then we were reparented already.
    if os.getppid() != parent_pid:
        os._exit(1)


class SelfFence:
    def __init__(self, safety_margin: float) -> None:
        self.safety_margin = safety_margin
        signal.signal(signal.SIGALRM, signal.SIG_DFL)

    def arm(self, expires_monotonic: float) -> None:
        """Be dead by expires_monotonic - safety_margin unless re-armed later."""
        remaining = expires_monotonic - self.safety_margin - FENCE_LEAD - time.monotonic()
        # A zero interval would disarm the timer; the smallest positive one fires at once.
        signal.setitimer(signal.ITIMER_REAL, max(remaining, 1e-6))

    def disarm(self) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
