"""PostgreSQL's unique keys and schedule guard rows: the schema version that adds them, and
the statements of backends/uniqueness.py."""

from __future__ import annotations

ACTIVE = "status IN ('pending', 'in_progress')"

MIGRATION: tuple[str, ...] = (
    "ALTER TABLE jobq_jobs ADD COLUMN IF NOT EXISTS unique_key text",
    # One active job per key, enforced by the index: the insert itself defers to it (ON
    # CONFLICT DO NOTHING), so a producer's transaction never aborts on a taken key.
    f"CREATE UNIQUE INDEX IF NOT EXISTS jobq_jobs_unique_active ON jobq_jobs (unique_key) "
    f"WHERE unique_key IS NOT NULL AND {ACTIVE}",
    """
    CREATE TABLE IF NOT EXISTS jobq_schedules (
        name       text PRIMARY KEY,
        spec       text NOT NULL,
        slot       timestamptz NOT NULL,
        job_id     bigint,
        updated_at timestamptz NOT NULL DEFAULT now()
    )
    """,
)


class PostgresUniqueness:
    sql_unique_holder = f"SELECT id FROM jobq_jobs WHERE unique_key = %(key)s AND {ACTIVE}"
    sql_clock = "SELECT now()"
    sql_guards = "SELECT name, spec, slot, job_id FROM jobq_schedules"
    sql_create_guard = """
        INSERT INTO jobq_schedules (name, spec, slot) VALUES (%(name)s, %(spec)s, %(slot)s)
        ON CONFLICT (name) DO NOTHING
    """
    sql_advance_guard = """
        UPDATE jobq_schedules SET spec = %(spec)s, slot = %(slot)s, updated_at = now()
        WHERE name = %(name)s AND spec = %(last_spec)s AND slot = %(last_slot)s
    """
    sql_guard_job = "UPDATE jobq_schedules SET job_id = %(job_id)s WHERE name = %(name)s"
    sql_is_active = f"SELECT 1 FROM jobq_jobs WHERE id = %(id)s AND {ACTIVE}"
