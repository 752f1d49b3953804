"""MySQL's and MariaDB's statements for what an attempt leaves besides its outcome: the
result and the error's class, the attempt history, progress and checkpoints."""

from __future__ import annotations

from ...retry import MAX_ATTEMPTS
from ..shapes import attempt_entry, history_appended
from .schema import NOW

# One statement, so that it applies whole or not at all (each DDL statement commits). The
# history is JSON text: MariaDB's JSON type is LONGTEXT anyway.
RESULTS: tuple[str, ...] = (
    """
    ALTER TABLE jobq_jobs
        ADD COLUMN result LONGTEXT NULL,
        ADD COLUMN error_class VARCHAR(1000) NULL,
        ADD COLUMN progress TEXT NULL,
        ADD COLUMN checkpoint LONGTEXT NULL,
        ADD COLUMN attempt_log LONGTEXT NULL,
        ADD COLUMN started_at DATETIME(6) NULL,
        ADD COLUMN attempted_at DATETIME(6) NULL
    """,
)


def epoch(moment: str) -> str:
    """A DATETIME(6) in UTC as Unix seconds, whatever the session's time zone."""
    return f"TIMESTAMPDIFF(MICROSECOND, '1970-01-01', {moment}) / 1000000"


def logged(
    error: str = "NULL", error_class: str = "NULL", began: str = "attempted_at", ended: str = NOW
) -> str:
    """The SET of attempt_log that appends the ending attempt (see shapes.attempt_entry).
    The attempt began and ended at the moments `began` and `ended`. It reads only columns
    that no assignment before it changes (MySQL assigns in order)."""
    entry = attempt_entry(
        "JSON_OBJECT",
        started=epoch(began),
        finished=epoch(ended),
        error=error,
        error_class=error_class,
    )
    log, length, append = (
        "coalesce(attempt_log, '[]')",
        "JSON_LENGTH({log})",
        ("JSON_ARRAY_APPEND({log}, '$', {entry})"),
    )
    return history_appended(log, length, append, entry)


# The attempt, while it holds its job: its suspension does not count (see Reporting).
UNCOUNT = f"""
    UPDATE jobq_jobs SET max_attempts = LEAST(max_attempts + 1, {MAX_ATTEMPTS})
    WHERE id = %(id)s AND token = %(token)s AND status = 'in_progress'
"""


# The attempt, while it still holds its job and its lease: {column} is progress or checkpoint.
ATTEMPT_WRITE = f"""
    UPDATE jobq_jobs SET {{column}} = %(value)s
    WHERE id = %(id)s AND token = %(token)s AND status = 'in_progress' AND lease_until > {NOW}
"""
