"""MySQL's and MariaDB's table of recorded steps (see backends/step_records.py)."""

from __future__ import annotations

from ..step_records import StepRecords
from .schema import NOW

# The steps go with their job, deleted by a trigger as its workflow edges are (not a foreign
# key, which would refuse a DROP of jobq_jobs). Names compare byte for byte, as the job
# types do since BINARY_IDENTIFIERS: two steps apart in case or trailing spaces stay apart.
STEPS: tuple[str, ...] = (
    """
    CREATE TABLE IF NOT EXISTS jobq_steps (
        job_id      BIGINT NOT NULL,
        name        VARBINARY(767) NOT NULL,
        value       LONGTEXT NOT NULL,
        attempt     INT NOT NULL,
        token       VARCHAR(64) NOT NULL,
        recorded_at DATETIME(6) NOT NULL,
        size        INT NOT NULL,
        PRIMARY KEY (job_id, name)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
    """,
    "CREATE TRIGGER jobq_steps_forget AFTER DELETE ON jobq_jobs FOR EACH ROW "
    "DELETE FROM jobq_steps WHERE job_id = OLD.id",
)


class MysqlStepRecords(StepRecords):
    # A locking read: it sees the row's latest committed version, not the transaction's
    # snapshot, and holds off a recovery until the step has committed.
    sql_record_step = f"""
        INSERT INTO jobq_steps (job_id, name, value, attempt, token, recorded_at, size)
        SELECT id, %(name)s, %(value)s, attempts, token, {NOW}, %(size)s FROM jobq_jobs
        WHERE id = %(id)s AND token = %(token)s AND status = 'in_progress'
          AND lease_until > {NOW}
        LOCK IN SHARE MODE
    """
    sql_steps_of = "SELECT name, value FROM jobq_steps WHERE job_id = %(id)s"
    sql_step_records = """
        SELECT name, attempt, recorded_at, size FROM jobq_steps WHERE job_id = %(id)s
        ORDER BY recorded_at, name
    """
