"""How the end of an attempt is written down: the error text kept, the outcome a settled
status means, the job's next step after a failure, and the fields of its log lines."""

from __future__ import annotations

import traceback
from typing import Any

from .errors import (
    AttemptEnded,
    JobCancelled,
    JobTimedOut,
    LeaseExpired,
    Suspended,
    WorkerDied,
    WorkerStopped,
)
from .records import ClaimedJob, Outcome, Status
from .retry import RetryPolicy

# last_error keeps the end of a traceback, where the cause is.
MAX_ERROR_LENGTH = 8000

LEASE_EXPIRED_BEFORE_START = "Lease expired before execution started"
LEASE_EXPIRED = "Lease expired: the attempt was abandoned without an acknowledgement"
CANCELLED_WHILE_RUNNING = "Cancelled by an operator while it ran; the attempt ended: {}"


# A failure recorded as a message, not an exception, by how that message starts (written
# here, in the supervisor's STOP_CAUSES and stop_cause(), and by a worker's cancel): the
# class that names it. tests/unit/test_unraised.py holds every such message to this table.
UNRAISED: tuple[tuple[str, type[AttemptEnded]], ...] = (
    ("Job timed out", JobTimedOut),
    ("Lease expired", LeaseExpired),
    ("Stopped: its lease", LeaseExpired),
    ("The worker died", WorkerDied),
    ("Interrupted", WorkerStopped),
    ("Its worker was stopped", WorkerStopped),
    ("its worker was stopped", WorkerStopped),
    ("Cancelled", JobCancelled),
    ("Suspended", Suspended),
)


def unraised_class(message: str) -> str:
    """The class path that names a failure recorded as `message` alone (see UNRAISED);
    jobq.errors.AttemptEnded for a message no entry knows."""
    kind = next((kind for start, kind in UNRAISED if message.startswith(start)), AttemptEnded)
    return f"{kind.__module__}.{kind.__qualname__}"


def printable(error: BaseException) -> str:
    """repr(error), or its class name if its own __repr__ fails: a log line must not."""
    try:
        return repr(error)
    except Exception:
        return f"<{type(error).__name__}: repr() failed>"


def describe(error: BaseException | str) -> str:
    text = error if isinstance(error, str) else "".join(traceback.format_exception(error))
    # A NUL byte or a lone surrogate in an exception's message would make the database
    # refuse the failure itself, and the attempt could never be recorded.
    text = text.rstrip().replace("\x00", "\\x00")
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= MAX_ERROR_LENGTH else "…" + text[-MAX_ERROR_LENGTH:]


FAILURE_OUTCOMES = {
    None: Outcome.LOST,
    Status.PENDING: Outcome.RETRIED,
    Status.FAILED: Outcome.FAILED,
    Status.EXPIRED: Outcome.EXPIRED,
    Status.CANCELLED: Outcome.CANCELLED,
}


def next_step(retry: RetryPolicy, attempts: int) -> tuple[Status, float]:
    """After a failed attempt: requeue after the policy's delay, or fail for good."""
    if retry.allows_another(attempts):
        return Status.PENDING, retry.delay_after(attempts)
    return Status.FAILED, 0.0


def job_extra(claim: ClaimedJob, event: str) -> dict[str, Any]:
    """Fields a structured log formatter can pick up."""
    return {"job_id": claim.id, "job_type": claim.type, "attempt": claim.attempt, "event": event}
