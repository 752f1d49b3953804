"""PostgreSQL's statements for an operator's controls (see controls.py)."""

from __future__ import annotations

from .controls import RECORD_COLUMNS, UNFINISHED_COUNTS, Controls

# Wakes idle workers: the payload is the job's type.
NOTIFY_CHANNEL = "jobq_jobs"


class PostgresControls(Controls):
    sql_get = f"SELECT {RECORD_COLUMNS} FROM jobq_jobs WHERE id = %(id)s"

    sql_jobs = f"""
        SELECT {RECORD_COLUMNS} FROM jobq_jobs
        WHERE (%(status)s::text IS NULL OR status = %(status)s::text)
          AND (%(type)s::text IS NULL OR type = %(type)s::text)
          AND (%(before)s::bigint IS NULL OR id < %(before)s::bigint)
        ORDER BY id DESC LIMIT %(limit)s
    """

    sql_cancel = """
        UPDATE jobq_jobs SET
            cancel_requested_at = CASE WHEN status = 'in_progress'
                THEN coalesce(cancel_requested_at, now()) END,
            finished_at = CASE WHEN status = 'pending' THEN now() END,
            status = CASE WHEN status = 'pending' THEN 'cancelled' ELSE status END,
            updated_at = now()
        WHERE id = %(id)s AND status IN ('pending', 'in_progress')
    """

    sql_end_cancelled = """
        UPDATE jobq_jobs SET status = 'cancelled', token = NULL, lease_until = NULL,
            last_error = %(error)s, updated_at = now(), finished_at = now()
        WHERE id = %(id)s AND token = %(token)s AND status = 'in_progress'
          AND cancel_requested_at IS NOT NULL
    """

    sql_cancel_requested = """
        SELECT cancel_requested_at IS NOT NULL FROM jobq_jobs
        WHERE id = %(id)s AND token = %(token)s
    """

    sql_retry = """
        UPDATE jobq_jobs SET status = 'pending', scheduled_at = now(), finished_at = NULL,
            cancel_requested_at = NULL, max_attempts = greatest(max_attempts, attempts + 1),
            updated_at = now()
        WHERE id = %(id)s AND status IN ('failed', 'expired', 'cancelled')
          AND (deadline IS NULL OR deadline > now())
    """

    sql_pause = "INSERT INTO jobq_paused (type) VALUES (%(type)s) ON CONFLICT DO NOTHING"

    # The wake-up goes out with the commit, as an enqueue's does.
    sql_resume = """
        WITH resumed AS (DELETE FROM jobq_paused WHERE type = %(type)s RETURNING type)
        SELECT count(pg_notify(%(channel)s, type)) FROM resumed
    """

    sql_paused = "SELECT type FROM jobq_paused"

    sql_completions = """
        SELECT floor(extract(epoch FROM now() - finished_at) / 60)::integer AS ago, count(*)
        FROM jobq_jobs
        WHERE finished_at > now() - make_interval(mins => %(minutes)s) AND status = 'completed'
        GROUP BY ago
    """

    sql_recent_counts = (
        UNFINISHED_COUNTS
        + """
        SELECT type, status, count(*) FROM jobq_jobs
        WHERE finished_at > now() - make_interval(mins => %(minutes)s) GROUP BY type, status
    """
    )

    def resume(self, job_type: str) -> bool:
        row = self.fetchone(self.sql_resume, {"type": job_type, "channel": NOTIFY_CHANNEL})
        return bool(row[0])
