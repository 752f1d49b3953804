"""PostgreSQL's workflows: the waiting status, the dependency edges, and the triggers that
release, cancel or revive a job's dependents as it ends or is retried.

The triggers see every ending of a job with dependents (flagged, see FLAGGED_PARENTS),
whichever statement makes it (an acknowledgement alone, fused with the next claim or
batched, a settle, the recovery of an ended lease, an operator's cancel, an expiry), so a
dependent is released in the transaction of its last parent's ending. Each locks the
parent's dependents in id order before counting down: two parents ending at once on two
connections take their shared child's lock in turn, and the second counts down from what the
first committed, so exactly one of them releases it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..rows import NewJob
from ..steps import Steps, count
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


def end_trigger(flagged: str = "") -> str:
    """The trigger on every ending; `flagged`, a condition on the row before it, ANDed."""
    return (
        "CREATE TRIGGER jobq_workflow_end AFTER UPDATE OF status ON jobq_jobs FOR EACH ROW "
        f"WHEN ({flagged}OLD.status NOT IN ({ENDINGS}) AND NEW.status IN ({ENDINGS})) "
        "EXECUTE FUNCTION jobq_workflow_end()"
    )


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
    end_trigger(),
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


# A parent is flagged when its first dependent is written, whichever statement or release
# writes it (this trigger), and only its ending fires the trigger above: the others (nearly
# every job) no longer pay the call and its check, about 4 us a job of a batched
# acknowledgement's server time. The flag only ever goes from NULL to true; one left on a
# job whose dependents are gone costs that job's ending the check, as before.
FLAG = (
    "UPDATE jobq_jobs SET has_dependents = true WHERE id IN ({parents}) AND has_dependents IS NULL"
)
FLAGGED_PARENTS: tuple[str, ...] = (
    # No default: adding the column rewrites no rows.
    "ALTER TABLE jobq_jobs ADD COLUMN has_dependents boolean",
    "CREATE FUNCTION jobq_workflow_flag() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    f"{FLAG.format(parents='SELECT parent FROM added')}; RETURN NULL; END $$",
    "CREATE TRIGGER jobq_workflow_flag AFTER INSERT ON jobq_dependencies "
    "REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION jobq_workflow_flag()",
    # The parents of the edges written before this version. The ALTER above holds the jobs
    # table until the commit, and every writer of an edge locks the edge's jobs first: no
    # edge can be written between this and the trigger's taking over.
    FLAG.format(parents="SELECT parent FROM jobq_dependencies"),
    "DROP TRIGGER jobq_workflow_end ON jobq_jobs",
    end_trigger("OLD.has_dependents AND "),
)


class PostgresWorkflows(Workflows):
    lock_rows = " FOR SHARE"

    def add_after_steps(self, jobs: Sequence[NewJob], parents: Sequence[int]) -> Steps[list[int]]:
        # The flag first, before the parents are locked FOR SHARE: set by the trigger once
        # the edges are written, it would be an update of a row that a concurrent enqueue
        # after the same parent holds FOR SHARE too, and each would wait for the other (a
        # deadlock). Set here, the second enqueue waits for the first to commit, then finds
        # the flag set and locks nothing; the trigger then finds it set too. A flag left
        # when the enqueue is refused after this costs that parent's ending a check only.
        marks, params = self.marks("parent", parents)
        yield from count(FLAG.format(parents=marks), params)
        return (yield from super().add_after_steps(jobs, parents))

    sql_wake = "SELECT pg_notify(%(channel)s, %(type)s)"
