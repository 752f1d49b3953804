"""SQLite's unique keys and schedule guard rows: the schema version that adds them, and the
statements of backends/uniqueness.py. Times are Unix seconds, as in every jobq table."""

from __future__ import annotations

NOW = "((julianday('now') - 2440587.5) * 86400.0)"

ACTIVE = "status IN ('pending', 'in_progress')"

MIGRATION: tuple[str, ...] = (
    "ALTER TABLE jobq_jobs ADD COLUMN unique_key TEXT",
    # One active job per key, enforced by the index; inserts defer to it (ON CONFLICT).
    f"CREATE UNIQUE INDEX IF NOT EXISTS jobq_jobs_unique_active ON jobq_jobs (unique_key) "
    f"WHERE unique_key IS NOT NULL AND {ACTIVE}",
    f"""
    CREATE TABLE IF NOT EXISTS jobq_schedules (
        name       TEXT PRIMARY KEY,
        spec       TEXT NOT NULL,
        slot       REAL NOT NULL,
        job_id     INTEGER,
        updated_at REAL NOT NULL DEFAULT {NOW}
    )
    """,
)


class SqliteUniqueness:
    sql_unique_holder = f"SELECT id FROM jobq_jobs WHERE unique_key = :key AND {ACTIVE}"
    sql_clock = f"SELECT {NOW}"
    sql_guards = "SELECT name, spec, slot, job_id FROM jobq_schedules"
    sql_create_guard = """
        INSERT INTO jobq_schedules (name, spec, slot) VALUES (:name, :spec, :slot)
        ON CONFLICT (name) DO NOTHING
    """
    sql_advance_guard = f"""
        UPDATE jobq_schedules SET spec = :spec, slot = :slot, updated_at = {NOW}
        WHERE name = :name AND spec = :last_spec AND slot = :last_slot
    """
    sql_guard_job = "UPDATE jobq_schedules SET job_id = :job_id WHERE name = :name"
    sql_is_active = f"SELECT 1 FROM jobq_jobs WHERE id = :id AND {ACTIVE}"
