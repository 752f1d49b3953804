"""SQLite's statements for an operator's controls (see controls.py)."""

from __future__ import annotations

from .controls import RECORD_COLUMNS, UNFINISHED_COUNTS, Controls
from .sqlite_schema import NOW


class SqliteControls(Controls):
    sql_get = f"SELECT {RECORD_COLUMNS} FROM jobq_jobs WHERE id = :id"

    sql_jobs = f"""
        SELECT {RECORD_COLUMNS} FROM jobq_jobs
        WHERE (:status IS NULL OR status = :status) AND (:type IS NULL OR type = :type)
          AND (:before IS NULL OR id < :before)
        ORDER BY id DESC LIMIT :limit
    """

    sql_cancel = f"""
        UPDATE jobq_jobs SET
            cancel_requested_at = CASE WHEN status = 'in_progress'
                THEN coalesce(cancel_requested_at, {NOW}) END,
            finished_at = CASE WHEN status = 'pending' THEN {NOW} END,
            status = CASE WHEN status = 'pending' THEN 'cancelled' ELSE status END,
            updated_at = {NOW}
        WHERE id = :id AND status IN ('pending', 'in_progress')
    """

    sql_end_cancelled = f"""
        UPDATE jobq_jobs SET status = 'cancelled', token = NULL, lease_until = NULL,
            last_error = :error, updated_at = {NOW}, finished_at = {NOW}
        WHERE id = :id AND token = :token AND status = 'in_progress'
          AND cancel_requested_at IS NOT NULL
    """

    sql_cancel_requested = """
        SELECT cancel_requested_at IS NOT NULL FROM jobq_jobs WHERE id = :id AND token = :token
    """

    sql_retry = f"""
        UPDATE jobq_jobs SET status = 'pending', scheduled_at = {NOW}, finished_at = NULL,
            cancel_requested_at = NULL, max_attempts = max(max_attempts, attempts + 1),
            updated_at = {NOW}
        WHERE id = :id AND status IN ('failed', 'expired', 'cancelled')
          AND (deadline IS NULL OR deadline > {NOW})
    """

    sql_pause = f"INSERT OR IGNORE INTO jobq_paused (type, paused_at) VALUES (:type, {NOW})"

    # SQLite has no wake-ups: idle workers see a resumed type at their next poll.
    sql_resume = "DELETE FROM jobq_paused WHERE type = :type"

    sql_paused = "SELECT type FROM jobq_paused"

    sql_completions = f"""
        SELECT CAST(({NOW} - finished_at) / 60 AS INTEGER) AS ago, count(*) FROM jobq_jobs
        WHERE finished_at > {NOW} - :minutes * 60 AND status = 'completed' GROUP BY ago
    """

    sql_recent_counts = (
        UNFINISHED_COUNTS
        + f"""
        SELECT type, status, count(*) FROM jobq_jobs
        WHERE finished_at > {NOW} - :minutes * 60 GROUP BY type, status
    """
    )
