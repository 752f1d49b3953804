"""SQLite's workflows: the waiting status, the dependency edges, and the triggers that
release, cancel or revive a job's dependents as it ends or is retried.

The triggers see every ending, whichever statement makes it, and SQLite runs one writer at
a time: a dependent is released in its last parent's transaction, exactly once. A trigger
does not fire itself again (recursive_triggers is off by default), so each one reaches the
dependents of dependents itself, through a recursive query.
"""

from __future__ import annotations

from ..workflows import BAD_ENDINGS, ENDINGS, Workflows
from .schema import NOW, STATUSES_V2

# The dependents enqueued after= that are in `status`, at every depth below the row that
# ended, each with the parent it is reached through. (A batch's `then` is reached through
# an any_ending edge: it is counted down, never cancelled.)
WAITING_BELOW = """WITH RECURSIVE below(id, parent) AS (
        SELECT d.child, d.parent FROM jobq_dependencies d
        WHERE d.parent = NEW.id AND NOT d.any_ending
        UNION SELECT d.child, d.parent FROM jobq_dependencies d JOIN below ON d.parent = below.id
        WHERE NOT d.any_ending
    ) SELECT below.{column} FROM below JOIN jobq_jobs w ON w.id = below.id
    WHERE w.status = '{status}'"""

# Counts a dependent down by `{ended}` endings and releases it at none left.
COUNT_DOWN = f"""UPDATE jobq_jobs SET waiting_for = waiting_for - {{ended}},
            status = CASE WHEN status = 'waiting' AND waiting_for = {{ended}}
                THEN 'pending' ELSE status END,
            updated_at = {NOW}"""

# The batch edges from the rows that ended: the row itself and the dependents its ending
# cancels (a trigger does not fire again for those).
CANCELLED_BELOW = WAITING_BELOW.format(column="id", status="waiting")
ENDED_MEMBERS = f"""jobq_dependencies e WHERE e.any_ending
    AND (e.parent = NEW.id OR e.parent IN ({CANCELLED_BELOW}))"""
ENDED_OF_ROW = f"(SELECT count(*) FROM {ENDED_MEMBERS} AND e.child = jobq_jobs.id)"

# The check as version 2 wrote it, and with 'waiting', quoted as SQL strings.
CHECK = f"(status IN ({STATUSES_V2}))".replace("'", "''")
WIDER_CHECK = CHECK.replace("))", ", ''waiting''))")

WORKFLOWS: tuple[str, ...] = (
    # The status check gains 'waiting'. SQLite cannot alter a check in place; rather than
    # copy the table (and remake its indexes and triggers), the table's definition is
    # rewritten, which SQLite documents as safe for a check that every row still meets.
    # RESET rereads the schema on this connection; the CREATE TABLE after it bumps the
    # schema's version, so every other connection rereads it too.
    "PRAGMA writable_schema = ON",
    f"UPDATE sqlite_schema SET sql = replace(sql, '{CHECK}', '{WIDER_CHECK}') "
    "WHERE type = 'table' AND name = 'jobq_jobs'",
    "PRAGMA writable_schema = RESET",
    "CREATE TABLE jobq_dependencies (parent INTEGER NOT NULL, child INTEGER NOT NULL, "
    "any_ending INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (parent, child)) WITHOUT ROWID",
    "CREATE INDEX jobq_dependencies_child ON jobq_dependencies (child, parent)",
    "ALTER TABLE jobq_jobs ADD COLUMN waiting_for INTEGER",
    "ALTER TABLE jobq_jobs ADD COLUMN cancelled_by INTEGER",
    "ALTER TABLE jobq_jobs ADD COLUMN batch_id INTEGER",
    "CREATE INDEX jobq_jobs_batches ON jobq_jobs (batch_id, status) WHERE batch_id IS NOT NULL",
    # A pruned job's edges to its parents go with it: the table does not outgrow the jobs.
    "CREATE TRIGGER jobq_workflow_forget AFTER DELETE ON jobq_jobs "
    "BEGIN DELETE FROM jobq_dependencies WHERE child = OLD.id; END",
    # A dependent counts down its parents still to complete even while it is cancelled, so
    # that a retried parent's revived dependents wait for exactly the rest.
    f"""
    CREATE TRIGGER jobq_workflow_release AFTER UPDATE OF status ON jobq_jobs
    WHEN OLD.status NOT IN ({ENDINGS}) AND NEW.status = 'completed'
    BEGIN
        {COUNT_DOWN.format(ended=1)}
        WHERE id IN (SELECT child FROM jobq_dependencies WHERE parent = NEW.id);
    END
    """,
    f"""
    CREATE TRIGGER jobq_workflow_cancel AFTER UPDATE OF status ON jobq_jobs
    WHEN OLD.status NOT IN ({ENDINGS}) AND NEW.status IN ({BAD_ENDINGS})
    BEGIN
        {COUNT_DOWN.format(ended=ENDED_OF_ROW)}
        WHERE id IN (SELECT e.child FROM {ENDED_MEMBERS});
        UPDATE jobq_jobs SET status = 'cancelled', finished_at = {NOW}, updated_at = {NOW},
            cancelled_by = ({WAITING_BELOW.format(column="parent", status="waiting")}
                            AND below.id = jobq_jobs.id LIMIT 1),
            last_error = 'Parent job ' || ({WAITING_BELOW.format(column="parent", status="waiting")}
                            AND below.id = jobq_jobs.id LIMIT 1) || ' ended '
                || (CASE WHEN id IN (SELECT child FROM jobq_dependencies WHERE parent = NEW.id)
                    THEN NEW.status ELSE 'cancelled' END)
        WHERE id IN ({CANCELLED_BELOW});
    END
    """,
    # A retried parent brings back the dependents its ending cancelled (and theirs), unless
    # another of their parents ended badly too. A retried batch member is waited for again
    # by its batch's `then`, if that still waits.
    f"""
    CREATE TRIGGER jobq_workflow_revive AFTER UPDATE OF status ON jobq_jobs
    WHEN OLD.status IN ({BAD_ENDINGS}) AND NEW.status IN ('pending', 'waiting')
    BEGIN
        UPDATE jobq_jobs SET waiting_for = waiting_for + 1 WHERE status = 'waiting'
            AND id IN (SELECT child FROM jobq_dependencies WHERE parent = NEW.id AND any_ending);
        UPDATE jobq_jobs SET status = 'waiting', cancelled_by = NULL, finished_at = NULL,
            last_error = NULL, updated_at = {NOW}
        WHERE cancelled_by IS NOT NULL
          AND id IN ({WAITING_BELOW.format(column="id", status="cancelled")})
          AND NOT EXISTS (SELECT 1 FROM jobq_dependencies o JOIN jobq_jobs p ON p.id = o.parent
              WHERE o.child = jobq_jobs.id AND p.status IN ({BAD_ENDINGS}) AND p.id <> NEW.id
                AND p.cancelled_by IS NULL);
    END
    """,
)


class SqliteWorkflows(Workflows):
    lock_rows = ""
