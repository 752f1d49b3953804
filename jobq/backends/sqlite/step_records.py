"""SQLite's table of recorded steps (see backends/step_records.py)."""

from __future__ import annotations

from ..step_records import StepRecords
from .schema import NOW

# The steps go with their job, deleted by a trigger as its workflow edges are.
STEPS: tuple[str, ...] = (
    f"""
    CREATE TABLE jobq_steps (
        job_id      INTEGER NOT NULL,
        name        TEXT NOT NULL,
        value       TEXT NOT NULL,
        attempt     INTEGER NOT NULL,
        token       TEXT NOT NULL,
        recorded_at REAL NOT NULL DEFAULT ({NOW}),
        size        INTEGER NOT NULL,
        PRIMARY KEY (job_id, name)
    ) WITHOUT ROWID
    """,
    "CREATE TRIGGER jobq_steps_forget AFTER DELETE ON jobq_jobs "
    "BEGIN DELETE FROM jobq_steps WHERE job_id = OLD.id; END",
)


class SqliteStepRecords(StepRecords):
    # SQLite runs one writer at a time: the row read is the latest.
    sql_record_step = f"""
        INSERT INTO jobq_steps (job_id, name, value, attempt, token, size)
        SELECT id, :name, :value, attempts, token, :size FROM jobq_jobs
        WHERE id = :id AND token = :token AND status = 'in_progress' AND lease_until > {NOW}
    """
    sql_steps_of = "SELECT name, value FROM jobq_steps WHERE job_id = :id"
    sql_step_records = """
        SELECT name, attempt, recorded_at, size FROM jobq_steps WHERE job_id = :id
        ORDER BY recorded_at, name
    """
