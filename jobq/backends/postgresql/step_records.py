"""PostgreSQL's table of recorded steps (see backends/step_records.py)."""

from __future__ import annotations

from ..step_records import StepRecords
from .schema import in_progress

# The steps go with their job, deleted by a trigger as its workflow edges are (not a foreign
# key, which would refuse a DROP of jobq_jobs).
STEPS: tuple[str, ...] = (
    """
    CREATE TABLE jobq_steps (
        job_id      bigint NOT NULL,
        name        text NOT NULL,
        value       text NOT NULL,
        attempt     integer NOT NULL,
        token       text NOT NULL,
        recorded_at timestamptz NOT NULL DEFAULT now(),
        size        integer NOT NULL,
        PRIMARY KEY (job_id, name)
    )
    """,
    "CREATE FUNCTION jobq_steps_forget() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "DELETE FROM jobq_steps WHERE job_id = OLD.id; RETURN NULL; END $$",
    "CREATE TRIGGER jobq_steps_forget AFTER DELETE ON jobq_jobs FOR EACH ROW "
    "EXECUTE FUNCTION jobq_steps_forget()",
)


class PostgresStepRecords(StepRecords):
    # FOR SHARE: read committed rechecks the guard on the row's latest version, as the
    # checkpoint's UPDATE does, and holds off a recovery until the step has committed.
    # statement_timestamp(), not now(): inside a transactional step's transaction now() is
    # when that transaction began, before the step ran, and a lease that ended while it ran
    # would pass.
    sql_record_step = f"""
        INSERT INTO jobq_steps (job_id, name, value, attempt, token, size)
        SELECT id, %(name)s, %(value)s, attempts, token, %(size)s FROM jobq_jobs
        WHERE id = %(id)s AND token = %(token)s AND {in_progress()}
          AND lease_until > statement_timestamp()
        FOR SHARE
    """
    sql_steps_of = "SELECT name, value FROM jobq_steps WHERE job_id = %(id)s"
    sql_step_records = """
        SELECT name, attempt, recorded_at, size FROM jobq_steps WHERE job_id = %(id)s
        ORDER BY recorded_at, name
    """
