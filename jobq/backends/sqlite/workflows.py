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

# The dependents still waiting, at every depth below the row that ended, each with the
# parent it is reached through.
WAITING_BELOW = """WITH RECURSIVE below(id, parent) AS (
        SELECT d.child, d.parent FROM jobq_dependencies d WHERE d.parent = NEW.id
        UNION SELECT d.child, d.parent FROM jobq_dependencies d JOIN below ON d.parent = below.id
    ) SELECT below.{column} FROM below JOIN jobq_jobs w ON w.id = below.id
    WHERE w.status = '{status}'"""

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
    "PRIMARY KEY (parent, child)) WITHOUT ROWID",
    "CREATE INDEX jobq_dependencies_child ON jobq_dependencies (child, parent)",
    "ALTER TABLE jobq_jobs ADD COLUMN waiting_for INTEGER",
    "ALTER TABLE jobq_jobs ADD COLUMN cancelled_by INTEGER",
    # A dependent counts down its parents still to complete even while it is cancelled, so
    # that a retried parent's revived dependents wait for exactly the rest.
    f"""
    CREATE TRIGGER jobq_workflow_release AFTER UPDATE OF status ON jobq_jobs
    WHEN OLD.status NOT IN ({ENDINGS}) AND NEW.status = 'completed'
    BEGIN
        UPDATE jobq_jobs SET waiting_for = waiting_for - 1,
            status = CASE WHEN status = 'waiting' AND waiting_for = 1
                THEN 'pending' ELSE status END,
            updated_at = {NOW}
        WHERE id IN (SELECT child FROM jobq_dependencies WHERE parent = NEW.id);
    END
    """,
    f"""
    CREATE TRIGGER jobq_workflow_cancel AFTER UPDATE OF status ON jobq_jobs
    WHEN OLD.status NOT IN ({ENDINGS}) AND NEW.status IN ({BAD_ENDINGS})
    BEGIN
        UPDATE jobq_jobs SET status = 'cancelled', finished_at = {NOW}, updated_at = {NOW},
            cancelled_by = ({WAITING_BELOW.format(column="parent", status="waiting")}
                            AND below.id = jobq_jobs.id LIMIT 1),
            last_error = 'Parent job ' || ({WAITING_BELOW.format(column="parent", status="waiting")}
                            AND below.id = jobq_jobs.id LIMIT 1) || ' ended '
                || (CASE WHEN id IN (SELECT child FROM jobq_dependencies WHERE parent = NEW.id)
                    THEN NEW.status ELSE 'cancelled' END)
        WHERE id IN ({WAITING_BELOW.format(column="id", status="waiting")});
    END
    """,
    # A retried parent brings back the dependents its ending cancelled (and theirs), unless
    # another of their parents ended badly too.
    f"""
    CREATE TRIGGER jobq_workflow_revive AFTER UPDATE OF status ON jobq_jobs
    WHEN OLD.status IN ({BAD_ENDINGS}) AND NEW.status IN ('pending', 'waiting')
    BEGIN
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
