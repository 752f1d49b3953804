"""MySQL's and MariaDB's schema for jobq: the jobs table and its indexes. Versions are
applied in order by Backend.install(); each statement of theirs is atomic on its own."""

from __future__ import annotations

NOW = "UTC_TIMESTAMP(6)"

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """
        CREATE TABLE IF NOT EXISTS jobq_jobs (
            id           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            type         VARCHAR(255) NOT NULL,
            class_name   VARCHAR(255) NOT NULL,
            payload      LONGTEXT NOT NULL,
            status       VARCHAR(16) NOT NULL DEFAULT 'pending',
            attempts     INT NOT NULL DEFAULT 0,
            max_attempts INT NOT NULL,
            backoff      DOUBLE NOT NULL,
            max_backoff  DOUBLE NOT NULL,
            jitter       BOOLEAN NOT NULL,
            token        VARCHAR(64) NULL,
            lease_until  DATETIME(6) NULL,
            scheduled_at DATETIME(6) NOT NULL,
            deadline     DATETIME(6) NULL,
            last_error   TEXT NULL,
            created_at   DATETIME(6) NOT NULL,
            updated_at   DATETIME(6) NOT NULL,
            finished_at  DATETIME(6) NULL,
            KEY jobq_jobs_ready (status, scheduled_at, id),
            KEY jobq_jobs_ready_by_type (status, type, scheduled_at, id),
            KEY jobq_jobs_leases (status, lease_until),
            KEY jobq_jobs_deadlines (status, deadline),
            KEY jobq_jobs_finished (finished_at)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
        """,
    ),
    (
        # One statement, so that it applies whole or not at all: MySQL commits each DDL
        # statement on its own. The ready indexes keep their names, which claims force, and
        # now lead with the priority (descending: MariaDB 10.8 and MySQL 8 keep the order).
        """
        ALTER TABLE jobq_jobs
            ADD COLUMN priority SMALLINT NOT NULL DEFAULT 0,
            ADD CONSTRAINT jobq_jobs_priority_check CHECK (priority BETWEEN -1000 AND 1000),
            ADD COLUMN host VARCHAR(255) NULL,
            ADD COLUMN pid INT NULL,
            ADD COLUMN cancel_requested_at DATETIME(6) NULL,
            DROP KEY jobq_jobs_ready,
            ADD KEY jobq_jobs_ready (status, priority DESC, scheduled_at, id),
            DROP KEY jobq_jobs_ready_by_type,
            ADD KEY jobq_jobs_ready_by_type (status, type, priority DESC, scheduled_at, id)
        """,
        """
        CREATE TABLE IF NOT EXISTS jobq_paused (
            type      VARCHAR(255) NOT NULL PRIMARY KEY,
            paused_at DATETIME(6) NOT NULL
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
        """,
    ),
)

# The worker incarnation that made each claim (see running.worker_id). A supervisor settles
# a dead child's rows by it; that reads only in-progress rows, through jobq_jobs_leases
# (which leads with the status), so no index of its own weighs on claims.
WORKER_IDS: tuple[str, ...] = ("ALTER TABLE jobq_jobs ADD COLUMN worker VARCHAR(32) NULL",)

# The W3C trace context of the enqueue that traced the job (see jobq/tracing.py), which each
# claim reads back for the attempt's span. NULL for every row enqueued untraced: no rewrite.
# One statement (MySQL commits each DDL statement on its own). A traceparent of version 00 is
# 55 characters; a tracestate may hold up to 32 entries of 256, so it gets a TEXT.
TRACE_CONTEXT: tuple[str, ...] = (
    """
    ALTER TABLE jobq_jobs
        ADD COLUMN traceparent VARCHAR(55) CHARACTER SET ascii NULL,
        ADD COLUMN tracestate TEXT CHARACTER SET ascii NULL
    """,
)

# A column as (its name and type, the rest of its definition), to be given {bin}.
Column = tuple[str, str]
TYPE: Column = ("type VARCHAR(255)", "NOT NULL")


def binary(table: str, *columns: Column) -> str:
    """The ALTER that gives `table`'s default and each of `columns` the collation {bin}."""
    changes = [
        f"MODIFY {name} CHARACTER SET utf8mb4 COLLATE {{bin}} {rest}" for name, rest in columns
    ]
    return ", ".join(
        [f"ALTER TABLE {table} DEFAULT CHARACTER SET utf8mb4 COLLATE {{bin}}", *changes]
    )


# Types, keys and the other identifiers compare byte for byte, as on PostgreSQL and SQLite:
# under utf8mb4_general_ci, claim(type="email") took the EMAIL and "email " jobs, pausing
# email paused EMAIL, and counts merged them. utf8mb4_bin is not enough: on MariaDB it still
# pads with spaces ('email' = 'email '). The binary collation without padding is
# utf8mb4_nopad_bin on MariaDB and utf8mb4_0900_bin on MySQL 8, so each ALTER below is run as
# a prepared statement with the server's own in place of {bin}. One ALTER a table (MySQL
# commits each DDL statement on its own), which keeps every row and rebuilds the indexes;
# each table's default changes too, for the columns later versions add. Payloads, errors,
# results and specs keep theirs: nothing compares them.
BINARY_IDENTIFIERS_SQL = (
    binary(
        "jobq_jobs",
        TYPE,
        ("class_name VARCHAR(255)", "NOT NULL"),
        ("status VARCHAR(16)", "NOT NULL DEFAULT 'pending'"),
        ("token VARCHAR(64)", "NULL"),
        ("host VARCHAR(255)", "NULL"),
        ("worker VARCHAR(32)", "NULL"),
        ("blocked_on VARCHAR(32)", "NULL"),
        ("error_class VARCHAR(1000)", "NULL"),
        ("unique_key VARCHAR(255)", "NULL"),
        ("limit_key VARCHAR(191)", "NULL"),
        ("rate_key VARCHAR(191)", "NULL"),
    ),
    binary("jobq_paused", TYPE),
    binary("jobq_limits", TYPE, ("name VARCHAR(32)", "NOT NULL")),
    binary("jobq_limit_keys", TYPE, ("limit_key VARCHAR(191)", "NOT NULL")),
    binary("jobq_limit_wakes", TYPE, ("limit_key VARCHAR(191)", "NOT NULL")),
    binary("jobq_rate_starts", TYPE, ("rate_key VARCHAR(191)", "NOT NULL")),
    binary("jobq_schedules", ("name VARCHAR(200)", "NOT NULL")),
    binary("jobq_workflow_endings", ("status VARCHAR(16)", "NOT NULL")),
    binary("jobq_dependencies"),
)


def with_server_collation(alter: str) -> tuple[str, ...]:
    """`alter` run with the server's binary, unpadded collation in place of {bin}."""
    quoted = alter.replace("'", "''")
    return (
        f"SET @jobq_alter = REPLACE('{quoted}', '{{bin}}', @jobq_bin)",
        "PREPARE jobq_alter FROM @jobq_alter",
        "EXECUTE jobq_alter",
        "DEALLOCATE PREPARE jobq_alter",
    )


BINARY_IDENTIFIERS: tuple[str, ...] = (
    "SET @jobq_bin = IF(VERSION() LIKE '%MariaDB%', 'utf8mb4_nopad_bin', 'utf8mb4_0900_bin')",
    *(statement for alter in BINARY_IDENTIFIERS_SQL for statement in with_server_collation(alter)),
)
