"""MySQL's and MariaDB's unique keys and schedule guard rows: the schema version that adds
them, and the statements of backends/uniqueness.py.

Neither has partial indexes, so the key is indexed through a generated column that holds it
only while the job is active, and is NULL (which a unique index does not compare) once the
job finishes. It is binary: the key is compared byte for byte, as PostgreSQL and SQLite
compare it, not by a collation that would take "A" for "a" or ignore trailing spaces.
"""

from __future__ import annotations

ACTIVE = "status IN ('pending', 'in_progress')"

# 255 characters of up to four bytes each.
KEY_BYTES = 1020

MIGRATION: tuple[str, ...] = (
    f"""
    ALTER TABLE jobq_jobs
        ADD COLUMN unique_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
        ADD COLUMN unique_active VARBINARY({KEY_BYTES})
            AS (CASE WHEN {ACTIVE} THEN CAST(unique_key AS BINARY) END) VIRTUAL,
        ADD UNIQUE KEY jobq_jobs_unique_active (unique_active)
    """,
    """
    CREATE TABLE IF NOT EXISTS jobq_schedules (
        name       VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
        spec       TEXT NOT NULL,
        slot       DATETIME(6) NOT NULL,
        job_id     BIGINT NULL,
        updated_at DATETIME(6) NOT NULL
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
    """,
)

# A taken key makes the insert update nothing but LAST_INSERT_ID, to the holder's id: one
# statement either way, and no error to abort the caller's transaction. (INSERT IGNORE would
# also turn data errors into warnings.)
ON_TAKEN_KEY = " ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)"


class MysqlUniqueness:
    sql_unique_holder = "SELECT id FROM jobq_jobs WHERE unique_active = %(key)s"
    sql_clock = "SELECT UTC_TIMESTAMP(6)"
    sql_guards = "SELECT name, spec, slot, job_id FROM jobq_schedules"
    sql_create_guard = """
        INSERT INTO jobq_schedules (name, spec, slot, updated_at)
        VALUES (%(name)s, %(spec)s, %(slot)s, UTC_TIMESTAMP(6))
        ON DUPLICATE KEY UPDATE name = name
    """
    sql_advance_guard = """
        UPDATE jobq_schedules SET spec = %(spec)s, slot = %(slot)s, updated_at = UTC_TIMESTAMP(6)
        WHERE name = %(name)s AND spec = %(last_spec)s AND slot = %(last_slot)s
    """
    sql_guard_job = "UPDATE jobq_schedules SET job_id = %(job_id)s WHERE name = %(name)s"
    sql_is_active = f"SELECT 1 FROM jobq_jobs WHERE id = %(id)s AND {ACTIVE}"

    def key_params(self, key: str) -> dict[str, object]:
        return {"key": key.encode()}
