"""What a running job can ask about its own attempt, and where an attempt runs."""

from __future__ import annotations

import dataclasses
import secrets
import socket
from contextvars import ContextVar

from ..backends.base import Backend
from ..backends.rows import Runner
from ..pid import getpid
from ..records import ClaimedJob

# Claims record where their attempt runs: this host, and the claiming process.
HOST = socket.gethostname()

# This process's worker id, with the pid it was drawn in: a forked child draws its own.
_worker: tuple[int, str] | None = None


# The attempt whose handle() is running, for code deep inside a job (see current_claim),
# and the backend of the queue it was claimed from (see cancel_requested): the backend, not
# the queue, so that this module needs nothing from consuming.py, which imports it.
running: ContextVar[ClaimedJob | None] = ContextVar("jobq_running", default=None)
running_on: ContextVar[Backend | None] = ContextVar("jobq_running_on", default=None)


def current_claim() -> ClaimedJob | None:
    """The attempt being run, from inside a job's handle(): its id makes a natural
    idempotency key for work that must not happen twice."""
    claim, backend = running.get(), running_on.get()
    if claim is None or backend is None:
        return claim
    # Bound here, when asked, not for every attempt: most jobs never read their parents.
    return dataclasses.replace(claim, parents_of=backend.parents)


def cancel_requested() -> bool:
    """From inside a job's handle(): whether an operator asked to cancel this job. A job that
    can stop early polls this now and then (each call is one small query) and returns; under
    jobq-supervise the worker is stopped for it anyway, within a renewal interval."""
    claim, backend = running.get(), running_on.get()
    if claim is None or backend is None:
        raise RuntimeError("cancel_requested() is for a job's handle(), while it runs")
    return backend.cancel_requested(claim.id, claim.token)


def new_worker_id() -> str:
    """A random id for one worker incarnation: pids are reused, these are not."""
    return secrets.token_hex(8)


def worker_id() -> str:
    """The id this process's claims carry: the one it was given (work_as), else one of its
    own, drawn once per process."""
    global _worker
    if _worker is None or _worker[0] != getpid():
        _worker = (getpid(), new_worker_id())
    return _worker[1]


def work_as(worker: str) -> None:
    """Make this process's claims carry `worker`: a supervised child's id, which its master
    chose before the fork, so that it knows the rows of a child that died before it said
    a word."""
    global _worker
    _worker = (getpid(), worker)


def runner(queued: bool = False) -> Runner:
    return Runner(HOST, getpid(), worker_id(), queued)
