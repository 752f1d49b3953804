"""SQLite's statements for what an attempt leaves besides its outcome: the result and error
columns, the attempt history, progress and checkpoints."""

from __future__ import annotations

from ...retry import MAX_ATTEMPTS
from ..shapes import attempt_entry, history_appended
from .schema import NOW

# SQLite adds one column a statement; the install's one transaction holds them together.
RESULTS: tuple[str, ...] = tuple(
    f"ALTER TABLE jobq_jobs ADD COLUMN {column}"
    for column in (
        "result TEXT",
        "error_class TEXT",
        "progress TEXT",
        "checkpoint TEXT",
        "attempt_log TEXT",
        "started_at REAL",
        "attempted_at REAL",
    )
)


def logged(
    error: str = "NULL", error_class: str = "NULL", began: str = "attempted_at", ended: str = NOW
) -> str:
    """The SET of attempt_log that appends the ending attempt (see shapes.attempt_entry),
    which began and ended at the moments `began` and `ended`."""
    entry = attempt_entry(
        "json_object",
        started=began,
        finished=ended,
        error=error,
        error_class=error_class,
    )
    log, length, append = (
        "coalesce(attempt_log, '[]')",
        "json_array_length({log})",
        ("json_insert({log}, '$[#]', {entry})"),
    )
    return history_appended(log, length, append, entry)


# The attempt, while it holds its job: its suspension does not count (see Reporting).
UNCOUNT = f"""
    UPDATE jobq_jobs SET max_attempts = min(max_attempts + 1, {MAX_ATTEMPTS})
    WHERE id = :id AND token = :token AND status = 'in_progress'
"""


# The attempt, while it still holds its job and its lease: {column} is progress or checkpoint.
ATTEMPT_WRITE = f"""
    UPDATE jobq_jobs SET {{column}} = :value
    WHERE id = :id AND token = :token AND status = 'in_progress' AND lease_until > {NOW}
"""
