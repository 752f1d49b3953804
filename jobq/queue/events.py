"""Waiting for an event: jobq.wait_for(key) suspends the job, holding no worker, until an
emit of `key` (Queue.emit, `jobq emit`) or its timeout, then returns the event's payload.
The wait is a step: what it returned, or that it timed out, is recorded once and replayed.
The first emit of a key wins, and an event emitted before the wait is kept for it
(backends/events.py says how none is missed in between)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from ..errors import EventTimeout, StepRefused
from ..results import bounded, to_json
from ..retry import MAX_DELAY
from .durable import Journal, opened
from .suspending import SUSPENDED, Suspend, seconds_of

# A key is at most this many bytes of UTF-8 (MySQL's key column).
KEY_LIMIT = 767
# An event's payload, as JSON, is at most this many bytes.
PAYLOAD_LIMIT = 64 * 1024


def checked_key(key: object) -> str:
    if not isinstance(key, str) or not key:
        raise TypeError(f"an event's key must be a non-empty str, got {key!r}")
    if len(key.encode("utf-8", "surrogatepass")) > KEY_LIMIT:
        raise ValueError(f"an event's key is at most {KEY_LIMIT} bytes of UTF-8, got {key!r}")
    return key


def encoded_payload(payload: Any) -> str:
    return bounded(to_json(payload, "the event's payload"), PAYLOAD_LIMIT, "the event's payload")


def wait_for(key: str, timeout: float | None = None, name: str | None = None) -> Any:
    """From inside a job's handle(): the payload of the event `key`, once emitted. Until
    then the job is suspended, holding no worker, and runs again from the top when the
    event comes (or its timeout ends); the wait is a step (named `name`, or for its place
    among this run's waits), so its payload is recorded once. With `timeout` (seconds, from
    the first run that reached the wait), raises jobq.EventTimeout once it ends first."""
    current = opened("jobq.wait_for()")
    checked_key(key)
    current.waits += 1
    label = name if name is not None else f"jobq.wait-{current.waits}"
    done, value = current.replayed(label)
    if not done:
        value = waited(current, key, label, until_of(current, label, timeout))
    if value.get("timeout"):
        raise EventTimeout(f"no event {key!r} was emitted before the wait's timeout")
    return value["payload"]


def until_of(current: Journal, label: str, timeout: float | None) -> float | None:
    """When the wait times out (Unix seconds), recorded by the first run to reach it."""
    if timeout is None:
        return None
    seconds = seconds_of(timeout, "jobq.wait_for()'s timeout")
    name = f"{label}.until"
    done, until = current.replayed(name)
    return float(until if done else current.record(name, time.time() + seconds))


def waited(current: Journal, key: str, label: str, until: float | None) -> dict[str, Any]:
    """The wait's outcome, recorded; or the attempt suspends."""
    claim, backend = current.claim, current.backend
    left = None if until is None else until - time.time()
    if left is not None and left <= 0:
        emitted, payload = backend.event_state(key)
        backend.unmark_event(claim.id, claim.token)  # woken by its timeout: no longer waits
        outcome = {"payload": json.loads(payload or "null")} if emitted else {"timeout": True}
        return dict(current.record(label, outcome))
    state = backend.hold_event(claim.id, claim.token, key)
    if state is None:
        current.lost = True
        raise StepRefused(current.refusal(label))
    if state[0]:
        return dict(current.record(label, {"payload": json.loads(state[1] or "null")}))
    until_text = "" if until is None else f" until {moment(until)}"
    message = f"{SUSPENDED}: waiting for event {key!r}{until_text} (step {label!r})"
    raise Suspend(MAX_DELAY if left is None else min(left, MAX_DELAY), message, event=True)


def moment(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).isoformat(timespec="seconds")
