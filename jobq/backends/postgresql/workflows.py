"""PostgreSQL's workflows: the waiting status, the dependency edges, and the triggers that
release, cancel or revive a job's dependents as it ends or is retried.

The triggers see every ending, whichever statement makes it (an acknowledgement alone, fused
with the next claim or batched, a settle, the recovery of an ended lease, an operator's
cancel, an expiry), so a dependent is released in the transaction of its last parent's
ending. Each locks the parent's dependents in id order before counting down: two parents
ending at once on two connections take their shared child's lock in turn, and the second
counts down from what the first committed, so exactly one of them releases it.
"""

from __future__ import annotations

from ..workflows import BAD_ENDINGS, ENDINGS, Workflows
from .controls import NOTIFY_CHANNEL
from .schema import STATUSES_V3

DEPENDENTS = "SELECT d.child FROM jobq_dependencies d WHERE d.parent = NEW.id"
# A batch's `then` job counts down every ending of its members (any_ending); a dependent
# enqueued after= counts down its parents' completions only.
COUNTED = f"{DEPENDENTS} AND (NEW.status = 'completed' OR d.any_ending)"
CANCELLED = f"{DEPENDENTS} AND NEW.status <> 'completed' AND NOT d.any_ending"
BATCHED = f"{DEPENDENTS} AND d.any_ending"


# A dependent counts down its parents still to complete (waiting_for) even while it is
# cancelled, so that a retried parent's revived dependents wait for exactly the rest.
def ending(create: str = "CREATE", guard: str = "") -> str:
    return f"""
    {create} FUNCTION jobq_workflow_end() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        woken text[];
    BEGIN
        {guard}
        PERFORM FROM jobq_jobs c WHERE c.id IN ({DEPENDENTS}) ORDER BY c.id FOR UPDATE;
        WITH released AS (
            UPDATE jobq_jobs c SET waiting_for = c.waiting_for - 1,
                status = CASE WHEN c.status = 'waiting' AND c.waiting_for = 1
                    THEN 'pending' ELSE c.status END,
                updated_at = now()
            WHERE c.id IN ({COUNTED})
            RETURNING c.type, c.status
        )
        SELECT array_agg(DISTINCT type) INTO woken FROM released WHERE status = 'pending';
        PERFORM pg_notify('{NOTIFY_CHANNEL}', t) FROM unnest(woken) AS t;
        UPDATE jobq_jobs c SET status = 'cancelled', cancelled_by = NEW.id,
            finished_at = now(), updated_at = now(),
            last_error = format('Parent job %s ended %s', NEW.id, NEW.status)
        WHERE c.id IN ({CANCELLED}) AND c.status = 'waiting';
        RETURN NULL;
    END
    $$
"""


END = ending()
# The ending of a job nothing depends on (nearly every job) returns at once: the three
# statements above cost 70 to 80% of a batched acknowledgement's server time (28 and 100
# acknowledged at 400 in progress, measured). No edge can appear between the check and
# them: an edge to an existing job is written with that job locked FOR SHARE (add_after),
# which this ending's update holds against, and a batch member is written with its edge.
LONE_ENDINGS: tuple[str, ...] = (
    ending("CREATE OR REPLACE", f"IF NOT EXISTS ({DEPENDENTS}) THEN RETURN NULL; END IF;"),
)

# A retried parent brings back the dependents its ending cancelled, unless another of their
# parents ended badly too; each revived dependent brings back its own the same way. A
# retried batch member is waited for again by its batch's `then`, if that still waits.
REVIVE = f"""
    CREATE FUNCTION jobq_workflow_revive() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE jobq_jobs c SET waiting_for = c.waiting_for + 1
        WHERE c.id IN ({BATCHED}) AND c.status = 'waiting';
        UPDATE jobq_jobs c SET status = 'waiting', cancelled_by = NULL, finished_at = NULL,
            last_error = NULL, updated_at = now()
        WHERE c.id IN ({DEPENDENTS} AND NOT d.any_ending) AND c.status = 'cancelled'
          AND c.cancelled_by IS NOT NULL
          AND NOT EXISTS (SELECT FROM jobq_dependencies o JOIN jobq_jobs p ON p.id = o.parent
                          WHERE o.child = c.id AND p.id <> NEW.id AND p.status IN ({BAD_ENDINGS}));
        RETURN NULL;
    END
    $$
"""

WORKFLOWS: tuple[str, ...] = (
    # No defaults: adding the columns rewrites no rows. Waiting jobs are outside every ready
    # index (they are all partial on status = 'pending'): they cost a claim nothing.
    "ALTER TABLE jobq_jobs ADD COLUMN waiting_for integer, ADD COLUMN cancelled_by bigint, "
    "ADD COLUMN batch_id bigint, "
    "DROP CONSTRAINT jobq_jobs_status_check, ADD CONSTRAINT jobq_jobs_status_check "
    f"CHECK (status IN ({STATUSES_V3}, 'waiting'))",
    "CREATE TABLE jobq_dependencies (parent bigint NOT NULL, child bigint NOT NULL, "
    "any_ending boolean NOT NULL DEFAULT false, PRIMARY KEY (parent, child))",
    "CREATE INDEX jobq_jobs_batches ON jobq_jobs (batch_id, status) WHERE batch_id IS NOT NULL",
    "CREATE INDEX jobq_dependencies_child ON jobq_dependencies (child, parent)",
    END,
    "CREATE TRIGGER jobq_workflow_end AFTER UPDATE OF status ON jobq_jobs FOR EACH ROW "
    f"WHEN (OLD.status NOT IN ({ENDINGS}) AND NEW.status IN ({ENDINGS})) "
    "EXECUTE FUNCTION jobq_workflow_end()",
    REVIVE,
    "CREATE TRIGGER jobq_workflow_revive AFTER UPDATE OF status ON jobq_jobs FOR EACH ROW "
    f"WHEN (OLD.status IN ({BAD_ENDINGS}) AND NEW.status IN ('pending', 'waiting')) "
    "EXECUTE FUNCTION jobq_workflow_revive()",
    # A pruned job's edges to its parents go with it: the table does not outgrow the jobs.
    "CREATE FUNCTION jobq_workflow_forget() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "DELETE FROM jobq_dependencies WHERE child = OLD.id; RETURN NULL; END $$",
    "CREATE TRIGGER jobq_workflow_forget AFTER DELETE ON jobq_jobs FOR EACH ROW "
    "EXECUTE FUNCTION jobq_workflow_forget()",
)


class PostgresWorkflows(Workflows):
    lock_rows = " FOR SHARE"
    sql_wake = "SELECT pg_notify(%(channel)s, %(type)s)"
