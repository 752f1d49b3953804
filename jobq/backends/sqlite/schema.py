"""SQLite's schema for jobq: the jobs table and its indexes. Versions are applied in order
by Backend.install(), each in one transaction."""

from __future__ import annotations

from ..shapes import FIRST_INDEXES

NOW = "((julianday('now') - 2440587.5) * 86400.0)"

# A pending job that may run now. Claims probe for it; metrics read its age.
READY = (
    f"status = 'pending' AND scheduled_at <= {NOW} "
    f"AND (deadline IS NULL OR deadline > {NOW}) AND attempts < max_attempts"
)

STATUSES_V2 = "'pending', 'in_progress', 'completed', 'failed', 'expired', 'cancelled'"

# Columns every version keeps, in order: version 2 copies them into its new table.
COLUMNS_V1 = (
    "id, type, class_name, payload, status, attempts, max_attempts, backoff, max_backoff, "
    "jitter, token, lease_until, scheduled_at, deadline, last_error, created_at, updated_at, "
    "finished_at"
)


def jobs_table(create: str, status_check: str, more_columns: str = "") -> str:
    """The jobs table as a version creates it: version 1's columns, the status checked by
    `status_check` (which starts with its own white space), then a later version's columns."""
    return f"""
        {create} (
            id           INTEGER PRIMARY KEY AUTOINCREMENT,
            type         TEXT NOT NULL,
            class_name   TEXT NOT NULL,
            payload      TEXT NOT NULL,
            status       TEXT NOT NULL DEFAULT 'pending' CHECK{status_check},
            attempts     INTEGER NOT NULL DEFAULT 0,
            max_attempts INTEGER NOT NULL,
            backoff      REAL NOT NULL,
            max_backoff  REAL NOT NULL,
            jitter       INTEGER NOT NULL,
            token        TEXT,
            lease_until  REAL,
            scheduled_at REAL NOT NULL,
            deadline     REAL,
            last_error   TEXT,
            created_at   REAL NOT NULL DEFAULT {NOW},
            updated_at   REAL NOT NULL DEFAULT {NOW},
            finished_at  REAL{more_columns}
        )
        """


MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        jobs_table(
            "CREATE TABLE IF NOT EXISTS jobq_jobs",
            "\n                (status IN ('pending', 'in_progress', 'completed', 'failed', "
            "'expired'))",
        ),
        *FIRST_INDEXES,
    ),
    (
        # The status check gains 'cancelled', which SQLite cannot alter in place: the table is
        # made anew and the rows copied, ids and the id sequence kept (AUTOINCREMENT never
        # reuses an id, not even a deleted one's). All in the install's one transaction.
        jobs_table(
            "CREATE TABLE jobq_jobs_v2",
            f" (status IN ({STATUSES_V2}))",
            """,
            priority     INTEGER NOT NULL DEFAULT 0 CHECK (priority BETWEEN -1000 AND 1000),
            host         TEXT,
            pid          INTEGER,
            cancel_requested_at REAL""",
        ),
        f"INSERT INTO jobq_jobs_v2 ({COLUMNS_V1}) SELECT {COLUMNS_V1} FROM jobq_jobs",
        "DELETE FROM sqlite_sequence WHERE name = 'jobq_jobs_v2'",
        "INSERT INTO sqlite_sequence (name, seq) "
        "SELECT 'jobq_jobs_v2', seq FROM sqlite_sequence WHERE name = 'jobq_jobs'",
        "DROP TABLE jobq_jobs",
        "ALTER TABLE jobq_jobs_v2 RENAME TO jobq_jobs",
        # Under their names, which claims force, now led by the priority.
        "CREATE INDEX jobq_jobs_ready ON jobq_jobs (priority DESC, scheduled_at, id) "
        "WHERE status = 'pending'",
        "CREATE INDEX jobq_jobs_ready_by_type ON jobq_jobs (type, priority DESC, scheduled_at, id) "
        "WHERE status = 'pending'",
        "CREATE INDEX jobq_jobs_leases ON jobq_jobs (lease_until) WHERE status = 'in_progress'",
        "CREATE INDEX jobq_jobs_deadlines ON jobq_jobs (deadline) "
        "WHERE status = 'pending' AND deadline IS NOT NULL",
        "CREATE INDEX jobq_jobs_finished ON jobq_jobs (finished_at) WHERE finished_at IS NOT NULL",
        "CREATE TABLE jobq_paused (type TEXT PRIMARY KEY, paused_at REAL NOT NULL)",
    ),
)

# The worker incarnation that made each claim (see running.worker_id). A supervisor settles
# a dead child's rows by it; that reads only in-progress rows, through jobq_jobs_leases, so
# no index of its own weighs on claims.
WORKER_IDS: tuple[str, ...] = ("ALTER TABLE jobq_jobs ADD COLUMN worker TEXT",)

# The W3C trace context of the enqueue that traced the job (see jobq/tracing.py), which each
# claim reads back for the attempt's span. NULL for every row enqueued untraced: no rewrite.
TRACE_CONTEXT: tuple[str, ...] = (
    "ALTER TABLE jobq_jobs ADD COLUMN traceparent TEXT",
    "ALTER TABLE jobq_jobs ADD COLUMN tracestate TEXT",
)
