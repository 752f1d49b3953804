"""MySQL's and MariaDB's statements for an operator's controls (see controls.py)."""

from __future__ import annotations

from ..controls import (
    LAST_ID,
    NEXT_PENDING_PRIORITY,
    NEXT_PENDING_TYPE,
    READY_AGE,
    RECORD_COLUMNS,
    UNFINISHED_COUNTS,
    Controls,
)
from .claims import READY
from .schema import NOW

# The status page's schema version: the index filtered lists of jobs walk in id order (see
# Controls.jobs). One statement, applied whole or not at all.
MIGRATION: tuple[str, ...] = (
    "ALTER TABLE jobq_jobs ADD KEY jobq_jobs_by_status (status, type, id)",
)


class MysqlControls(Controls):
    # The planner would as soon read the typed ready index, same first columns, and sort.
    jobs_index_hint = " FORCE INDEX (jobq_jobs_by_status)"
    sql_get = f"SELECT {RECORD_COLUMNS} FROM jobq_jobs WHERE id = %(id)s"

    sql_jobs = f"""
        SELECT {RECORD_COLUMNS} FROM jobq_jobs WHERE id < coalesce(%(before)s, {LAST_ID})
        ORDER BY id DESC LIMIT %(limit)s
    """

    # MySQL assigns SET columns left to right, each seeing the ones before: status goes last.
    sql_cancel = f"""
        UPDATE jobq_jobs SET
            cancel_requested_at = CASE WHEN status = 'in_progress'
                THEN coalesce(cancel_requested_at, {NOW}) END,
            finished_at = CASE WHEN status = 'pending' THEN {NOW} END,
            updated_at = {NOW},
            status = CASE WHEN status = 'pending' THEN 'cancelled' ELSE status END
        WHERE id = %(id)s AND status IN ('pending', 'in_progress')
    """

    sql_end_cancelled = f"""
        UPDATE jobq_jobs SET status = 'cancelled', token = NULL, lease_until = NULL,
            last_error = %(error)s, updated_at = {NOW}, finished_at = {NOW}
        WHERE id = %(id)s AND token = %(token)s AND status = 'in_progress'
          AND cancel_requested_at IS NOT NULL
    """

    sql_cancel_requested = """
        SELECT cancel_requested_at IS NOT NULL FROM jobq_jobs
        WHERE id = %(id)s AND token = %(token)s
    """

    sql_retry = f"""
        UPDATE jobq_jobs SET status = 'pending', scheduled_at = {NOW}, finished_at = NULL,
            cancel_requested_at = NULL, max_attempts = GREATEST(max_attempts, attempts + 1),
            updated_at = {NOW}
        WHERE id = %(id)s AND status IN ('failed', 'expired', 'cancelled')
          AND (deadline IS NULL OR deadline > {NOW})
    """

    sql_pause = f"INSERT IGNORE INTO jobq_paused (type, paused_at) VALUES (%(type)s, {NOW})"

    # No wake-ups here: idle workers see a resumed type at their next poll.
    sql_resume = "DELETE FROM jobq_paused WHERE type = %(type)s"

    sql_paused = "SELECT type FROM jobq_paused"

    sql_completions = f"""
        SELECT TIMESTAMPDIFF(MINUTE, finished_at, {NOW}) AS ago, count(*) FROM jobq_jobs
        WHERE finished_at > DATE_SUB({NOW}, INTERVAL %(minutes)s MINUTE) AND status = 'completed'
        GROUP BY ago
    """

    sql_recent_counts = (
        UNFINISHED_COUNTS
        + f"""
        SELECT type, status, count(*) FROM jobq_jobs
        WHERE finished_at > DATE_SUB({NOW}, INTERVAL %(minutes)s MINUTE) GROUP BY type, status
    """
    )

    sql_next_pending_type = NEXT_PENDING_TYPE.format(after="%(after)s")
    sql_next_pending_priority = NEXT_PENDING_PRIORITY.format(type="%(type)s", below="%(below)s")
    sql_ready_age = READY_AGE.format(
        age=f"TIMESTAMPDIFF(MICROSECOND, scheduled_at, {NOW}) / 1000000",
        ready=READY,
        type="%(type)s",
        priority="%(priority)s",
    )
