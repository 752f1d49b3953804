"""MySQL's and MariaDB's statements for an operator's controls (see controls.py)."""

from __future__ import annotations

from ..controls import LAST_ID, RECORD_COLUMNS, UNFINISHED_COUNTS, Controls, oldest_ready_probes
from .claims import READY
from .results import logged
from .schema import NOW

# The status page's schema version: the index filtered lists of jobs walk in id order (see
# Controls.jobs). One statement, applied whole or not at all.
MIGRATION: tuple[str, ...] = (
    "ALTER TABLE jobq_jobs ADD KEY jobq_jobs_by_status (status, type, id)",
)
# With no statistics InnoDB may walk the untyped ready index for the oldest-ready probes, same
# first column, and sort every pending row by type.
READY_HINT = " FORCE INDEX (jobq_jobs_ready_by_type)"


class MysqlControls(Controls):
    # The oldest InnoDB transaction, whose read view keeps purge from removing what later
    # ones deleted, and the history list length purge is behind by. Both need the PROCESS
    # privilege.
    sql_horizon = """
        SELECT h.holder, h.age,
               (SELECT `count` FROM information_schema.INNODB_METRICS
                WHERE name = 'trx_rseg_history_len')
        FROM (SELECT 1) AS one
        LEFT JOIN (
            SELECT concat('thread ', t.trx_mysql_thread_id, ' (',
                          coalesce(p.COMMAND, 'no command'), ', ', t.trx_state, ')') AS holder,
                   TIMESTAMPDIFF(MICROSECOND, t.trx_started, NOW(6)) / 1e6 AS age
            FROM information_schema.INNODB_TRX AS t
            LEFT JOIN information_schema.PROCESSLIST AS p ON p.ID = t.trx_mysql_thread_id
            WHERE t.trx_mysql_thread_id <> CONNECTION_ID()
            ORDER BY t.trx_started LIMIT 1
        ) AS h ON 1 = 1
    """
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
            finished_at = CASE WHEN status IN ('pending', 'waiting') THEN {NOW} END,
            updated_at = {NOW},
            status = CASE WHEN status IN ('pending', 'waiting') THEN 'cancelled' ELSE status END
        WHERE id = %(id)s AND status IN ('pending', 'waiting', 'in_progress')
    """

    sql_end_cancelled = f"""
        UPDATE jobq_jobs SET status = 'cancelled', token = NULL, lease_until = NULL,
            last_error = %(error)s, updated_at = {NOW}, finished_at = {NOW},
            {logged("%(error)s")}
        WHERE id = %(id)s AND token = %(token)s AND status = 'in_progress'
          AND cancel_requested_at IS NOT NULL
    """

    sql_cancel_requested = """
        SELECT cancel_requested_at IS NOT NULL FROM jobq_jobs
        WHERE id = %(id)s AND token = %(token)s
    """

    # MySQL refuses a subquery on the table an UPDATE changes, so the guard that no active
    # job holds the unique key (see NO_ACTIVE_HOLDER) is a join on the index of active keys.
    # No assignment reads a column another one sets: a join's are in no promised order.
    sql_retry = f"""
        UPDATE jobq_jobs LEFT JOIN jobq_jobs holder
            ON holder.unique_active = CAST(jobq_jobs.unique_key AS BINARY)
        SET jobq_jobs.status = 'pending', jobq_jobs.scheduled_at = {NOW},
            jobq_jobs.finished_at = NULL, jobq_jobs.cancel_requested_at = NULL,
            jobq_jobs.max_attempts = GREATEST(jobq_jobs.max_attempts, jobq_jobs.attempts + 1),
            jobq_jobs.updated_at = {NOW}
        WHERE jobq_jobs.id = %(id)s AND jobq_jobs.status IN ('failed', 'expired', 'cancelled')
          AND (jobq_jobs.deadline IS NULL OR jobq_jobs.deadline > {NOW}) AND holder.id IS NULL
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

    sql_endings = f"""
        SELECT type, status, FLOOR(TIMESTAMPDIFF(SECOND, finished_at, {NOW}) / %(bucket)s) AS ago,
               count(*)
        FROM jobq_jobs WHERE finished_at > DATE_SUB({NOW}, INTERVAL %(minutes)s MINUTE)
        GROUP BY type, status, ago
    """

    sql_recent_counts = (
        UNFINISHED_COUNTS
        + f"""
        SELECT type, status, count(*) FROM jobq_jobs
        WHERE finished_at > DATE_SUB({NOW}, INTERVAL %(minutes)s MINUTE) GROUP BY type, status
    """
    )

    sql_next_pending_type, sql_next_pending_priority, sql_ready_age = oldest_ready_probes(
        "%({})s",
        age=f"TIMESTAMPDIFF(MICROSECOND, scheduled_at, {NOW}) / 1000000",
        ready=READY,
        hint=READY_HINT,
    )
