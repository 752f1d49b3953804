"""The local view of a lease: when, by this process's monotonic clock, it certainly ends."""

from __future__ import annotations

import time


def expiry(lease: float) -> float:
    """The monotonic moment a lease granted by a statement about to be sent certainly lasts
    until: anchored before the send, so the local view of the lease errs early."""
    return time.monotonic() + lease
