"""What a job's row keeps of its attempts besides its status: the progress the running or
last attempt reported, and the history of the attempts that ended, read from the JSON the
backends write. Plain values, below records.py, which holds them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

# The attempt history keeps the first this many attempts (the row's own columns always hold
# the latest error): enough for any sane retry policy, and bounded for a mad one.
HISTORY_LIMIT = 32
# A progress note's most characters.
NOTE_LIMIT = 200


def loaded(text: str | None) -> Any:
    """A JSON column's value (checkpoint, progress, history), None when empty."""
    return None if text is None else json.loads(text)


class Progress(NamedTuple):
    """How far an attempt has got, as it last said (jobq.progress)."""

    done: float
    total: float | None = None
    note: str | None = None

    def encoded(self) -> str:
        value = {"done": self.done, "total": self.total, "note": self.note}
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def of(cls, text: str | None) -> Progress | None:
        value = loaded(text)
        return None if value is None else cls(value["done"], value["total"], value["note"])

    def __str__(self) -> str:
        shown = f"{self.done:g}" if self.total is None else f"{self.done:g}/{self.total:g}"
        return shown if self.note is None else f"{shown} {self.note}"


@dataclass(frozen=True)
class AttemptEntry:
    """One ended attempt, as the job's history keeps it. The error fields are None for a
    completed attempt; `error` is the traceback when the attempt raised an exception."""

    attempt: int
    worker: str | None
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None = None
    error_class: str | None = None

    @property
    def traceback(self) -> str | None:
        return None if self.error_class is None else self.error

    @property
    def outcome(self) -> str:
        """How the attempt ended in a word: the exception's class, "failed" for an attempt
        that ended without raising (its lease ran out, it was cancelled), or "completed"."""
        return self.error_class or ("failed" if self.error else "completed")

    @classmethod
    def of(cls, entry: dict[str, Any]) -> AttemptEntry:
        return cls(
            attempt=int(entry["attempt"]),
            worker=entry.get("worker"),
            started_at=moment(entry.get("started_at")),
            finished_at=moment(entry.get("finished_at")),
            error=entry.get("error"),
            error_class=entry.get("error_class"),
        )


def moment(seconds: float | None) -> datetime | None:
    """A time the history holds as Unix seconds (each database writes its own clock's)."""
    return None if seconds is None else datetime.fromtimestamp(float(seconds), UTC)


def history(text: str | None) -> tuple[AttemptEntry, ...]:
    return tuple(AttemptEntry.of(entry) for entry in loaded(text) or ())


def failed_attempt(entries: tuple[AttemptEntry, ...]) -> int | None:
    """The number of the latest attempt the history holds that ended badly, whose error the
    row's last_error then is; None if none did (or it is past HISTORY_LIMIT)."""
    failed = [entry.attempt for entry in entries if entry.outcome != "completed"]
    return failed[-1] if failed else None
