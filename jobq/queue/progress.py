"""What a running job reports besides its outcome: progress(), rate-limited and written at
the latest just before the outcome, and checkpoint(), written at once. Both are guarded by
the attempt's token and lease, so an attempt that was fenced or replaced writes nothing."""

from __future__ import annotations

import logging
import math
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ..attempt_log import NOTE_LIMIT, Progress
from ..backends.base import Backend
from ..records import ClaimedJob
from ..results import encode_checkpoint
from .running import running, running_on

log = logging.getLogger("jobq")


# At most one progress write per attempt this often (seconds): a call in a tight loop only
# keeps its value in memory, for the next write or the last one before the outcome.
PROGRESS_INTERVAL = 1.0


@dataclass
class Reported:
    """One attempt's progress as written, and the value still to write."""

    token: str
    written_at: float = -math.inf
    pending: str | None = None
    lost: bool = False  # a write was refused: the attempt no longer holds the job


reported: ContextVar[Reported | None] = ContextVar("jobq_progress", default=None)


def attempt(what: str) -> tuple[ClaimedJob, Backend]:
    claim, backend = running.get(), running_on.get()
    if claim is None or backend is None:
        raise RuntimeError(f"{what} is for a job's handle(), while it runs")
    return claim, backend


def number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"progress {name} must be a finite number, got {value!r}")
    if value < 0:
        raise ValueError(f"progress {name} must not be negative, got {value!r}")
    return value


def progress(done: float, total: float | None = None, note: str | None = None) -> None:
    """From inside a job's handle(): how far this attempt has got (`done` of `total`, with
    an optional short note). Shown by `jobq show`, `jobq jobs` and the status page. Written
    at most once a second; the last value is always written before the outcome."""
    claim, backend = attempt("progress()")
    value = Progress(
        number(done, "done"),
        None if total is None else number(total, "total"),
        None if note is None else checked_note(note),
    ).encoded()
    state = reported.get()
    if state is None or state.token != claim.token:
        state = Reported(claim.token)
        reported.set(state)
    state.pending = value
    if time.monotonic() - state.written_at >= PROGRESS_INTERVAL:
        write(state, claim, backend)


def checked_note(note: object) -> str:
    if not isinstance(note, str):
        raise TypeError(f"progress note must be a str, got {note!r}")
    if len(note) > NOTE_LIMIT:
        raise ValueError(f"progress note is {len(note)} characters, over {NOTE_LIMIT}")
    return note


def write(state: Reported, claim: ClaimedJob, backend: Backend) -> None:
    value, state.pending = state.pending, None
    if value is None or state.lost:
        return
    state.written_at = time.monotonic()
    if not backend.attempt_write("progress", claim.id, claim.token, value):
        state.lost = True
        log.warning(
            "Job %d: progress not recorded, this attempt no longer holds the job",
            claim.id,
            extra={"event": "progress_refused", "job_id": claim.id, "job_type": claim.type},
        )


def flush() -> None:
    """Write the running attempt's pending progress, once its handle() returned or raised.
    A failure is logged: the outcome,
    recorded next, matters more."""
    state, claim, backend = reported.get(), running.get(), running_on.get()
    reported.set(None)
    if state is None or claim is None or backend is None or state.token != claim.token:
        return
    try:
        write(state, claim, backend)
    except Exception:
        log.warning("Job %d: the last progress was not recorded", claim.id, exc_info=True)


def checkpoint(state: Any) -> bool:
    """From inside a job's handle(): save `state` (a small JSON value) for the job's next
    attempt, which reads it as jobq.current_claim().checkpoint; written at once. False when
    this attempt no longer holds the job (it was fenced or replaced): nothing was saved, and
    the job should stop. Cleared when the job completes."""
    claim, backend = attempt("checkpoint()")
    return backend.attempt_write("checkpoint", claim.id, claim.token, encode_checkpoint(state))
