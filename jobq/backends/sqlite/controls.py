"""SQLite's statements for an operator's controls (see controls.py)."""

from __future__ import annotations

from ...records import Horizon
from ..controls import (
    LAST_ID,
    NO_ACTIVE_HOLDER,
    RECORD_COLUMNS,
    UNFINISHED_COUNTS,
    Controls,
    oldest_ready_probes,
)
from ..steps import Steps, one
from .results import logged
from .schema import NOW, READY

# The status page's schema version: the index filtered lists of jobs walk in id order (see
# Controls.jobs).
MIGRATION: tuple[str, ...] = (
    "CREATE INDEX IF NOT EXISTS jobq_jobs_by_status ON jobq_jobs (status, type, id)",
)


class SqliteControls(Controls):
    # SQLite cannot name a reader or tell how long it has read: what shows is the WAL it
    # keeps from being checkpointed, (busy, frames in the WAL, frames checkpointed), which a
    # passive checkpoint (one that waits for no one) reports.
    sql_horizon = "PRAGMA wal_checkpoint(PASSIVE)"
    # The planner would as soon read the typed ready index, same first columns, and sort.
    jobs_index_hint = " INDEXED BY jobq_jobs_by_status"
    sql_get = f"SELECT {RECORD_COLUMNS} FROM jobq_jobs WHERE id = :id"

    # Lists read by rowid, newest first: with statistics taken while the table was small,
    # SQLite would read the jobs index whole and sort the rows.
    rowid_hint = " NOT INDEXED"
    sql_jobs = f"""
        SELECT {RECORD_COLUMNS} FROM jobq_jobs{rowid_hint} WHERE id < coalesce(:before, {LAST_ID})
        ORDER BY id DESC LIMIT :limit
    """

    sql_cancel = f"""
        UPDATE jobq_jobs SET
            cancel_requested_at = CASE WHEN status = 'in_progress'
                THEN coalesce(cancel_requested_at, {NOW}) END,
            finished_at = CASE WHEN status IN ('pending', 'waiting') THEN {NOW} END,
            status = CASE WHEN status IN ('pending', 'waiting') THEN 'cancelled' ELSE status END,
            updated_at = {NOW}
        WHERE id = :id AND status IN ('pending', 'waiting', 'in_progress')
    """

    sql_end_cancelled = f"""
        UPDATE jobq_jobs SET status = 'cancelled', token = NULL, lease_until = NULL,
            last_error = :error, updated_at = {NOW}, finished_at = {NOW},
            {logged(":error")}
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
          AND {NO_ACTIVE_HOLDER}
    """

    sql_pause = f"INSERT OR IGNORE INTO jobq_paused (type, paused_at) VALUES (:type, {NOW})"

    # SQLite has no wake-ups: idle workers see a resumed type at their next poll.
    sql_resume = "DELETE FROM jobq_paused WHERE type = :type"

    sql_paused = "SELECT type FROM jobq_paused"

    # The last hour's range of finished_at, which SQLite, without statistics, would leave
    # for every completed job in the jobs index (or all of that index, for its grouping).
    sql_completions = f"""
        SELECT CAST(({NOW} - finished_at) / 60 AS INTEGER) AS ago, count(*)
        FROM jobq_jobs INDEXED BY jobq_jobs_finished
        WHERE finished_at > {NOW} - :minutes * 60 AND status = 'completed' GROUP BY ago
    """

    sql_endings = f"""
        SELECT type, status, CAST(({NOW} - finished_at) / :bucket AS INTEGER) AS ago, count(*)
        FROM jobq_jobs INDEXED BY jobq_jobs_finished
        WHERE finished_at > {NOW} - :minutes * 60 GROUP BY type, status, ago
    """

    sql_recent_counts = (
        UNFINISHED_COUNTS
        + f"""
        SELECT type, status, count(*) FROM jobq_jobs INDEXED BY jobq_jobs_finished
        WHERE finished_at > {NOW} - :minutes * 60 GROUP BY type, status
    """
    )

    sql_next_pending_type, sql_next_pending_priority, sql_ready_age = oldest_ready_probes(
        ":{}", age=f"{NOW} - scheduled_at", ready=READY
    )

    def horizon_steps(self) -> Steps[Horizon]:
        row = yield from one(self.sql_horizon)
        # A database not in WAL mode has no WAL to keep: -1 frames.
        frames = 0 if row is None or row[1] < 0 else int(row[1]) - int(row[2])
        return Horizon(None, frames, None)
