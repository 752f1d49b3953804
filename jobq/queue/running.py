"""What a running job can ask about its own attempt, and where an attempt runs."""

from __future__ import annotations

import os
import socket
from contextvars import ContextVar

from ..backends.base import Backend
from ..backends.rows import Runner
from ..records import ClaimedJob

# Claims record where their attempt runs: this host, and the claiming process.
HOST = socket.gethostname()


# The attempt whose handle() is running, for code deep inside a job (see current_claim),
# and the backend of the queue it was claimed from (see cancel_requested): the backend, not
# the queue, so that this module needs nothing from consuming.py, which imports it.
running: ContextVar[ClaimedJob | None] = ContextVar("jobq_running", default=None)
running_on: ContextVar[Backend | None] = ContextVar("jobq_running_on", default=None)


def current_claim() -> ClaimedJob | None:
    """The attempt being run, from inside a job's handle(): its id makes a natural
    idempotency key for work that must not happen twice."""
    return running.get()


def cancel_requested() -> bool:
    """From inside a job's handle(): whether an operator asked to cancel this job. A job that
    can stop early polls this now and then (each call is one small query) and returns; under
    jobq-supervise the worker is stopped for it anyway, within a renewal interval."""
    claim, backend = running.get(), running_on.get()
    if claim is None or backend is None:
        raise RuntimeError("cancel_requested() is for a job's handle(), while it runs")
    return backend.cancel_requested(claim.id, claim.token)


def runner() -> Runner:
    return Runner(HOST, os.getpid())
