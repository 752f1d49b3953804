"""The Jobs list's filter as its address carries it, so that a view can be bookmarked and
shared: each field of records.JobFilter under a name of its own, read back and refused
with a line that names the field."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from werkzeug.exceptions import BadRequest

from ..queue.search import checked, path_of
from ..records import JobFilter, Status

# The fields given as text, as they are; the times, read as UTC (what the page shows).
TEXTS = ("type", "unique_key", "concurrency_key", "host", "equals", "error")
TIMES = (
    "created_after",
    "created_before",
    "scheduled_after",
    "scheduled_before",
    "finished_after",
    "finished_before",
)
# Every name the address may carry for the filter, in the form's order.
NAMES = ("status", "type", "priority", *TIMES, "unique_key", "concurrency_key", "host",
         "field", "equals", "error")  # fmt: skip


def given(args: Mapping[str, str]) -> dict[str, str]:
    """The filter's fields the address gives, without the empty ones the form sends."""
    return {name: args[name].strip() for name in NAMES if args.get(name, "").strip()}


def job_filter(args: Mapping[str, str]) -> JobFilter:
    fields = given(args)
    values: dict[str, Any] = {name: fields[name] for name in TEXTS if name in fields}
    try:
        if "status" in fields:
            values["status"] = status_of(fields["status"])
        if "priority" in fields:
            values["priority"] = whole(fields["priority"], "priority")
        for name in TIMES:
            if name in fields:
                values[name] = moment_of(fields[name], name)
        if "field" in fields:
            values["path"] = path_of(fields["field"])
        return checked(JobFilter(**values))
    except ValueError as error:
        raise BadRequest(f"The filter was not applied: {error}.") from None


def status_of(text: str) -> Status:
    if text not in set(Status):
        raise ValueError(f"status must be one of {', '.join(Status)}, got {text!r}")
    return Status(text)


def whole(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {text!r}") from None


def moment_of(text: str, name: str) -> datetime:
    """A time as a browser's datetime-local field sends it (2026-12-07T14:30), or any ISO
    8601 time; one without a zone is UTC, as every time the page shows."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{name} must be a time such as 2026-12-07T14:30, got {text!r}") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
