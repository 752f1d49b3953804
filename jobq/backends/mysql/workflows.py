"""MySQL's and MariaDB's workflows: the waiting status, the dependency edges, and how a
job's dependents are released, cancelled or revived as it ends or is retried.

A trigger there may not change the table its statement changes, so the trigger on the jobs
only records each ending of a job that has dependents in jobq_workflow_endings; the
backend applies the recorded endings in the transaction of the next claim, and of a settle,
whichever connection makes them. The fused acknowledgement and claim, alone or batched, so
release a dependent in its last parent's transaction; an acknowledgement on its own, an
operator's cancel or retry and an expiry leave it to the next claim (idle workers poll on
MySQL anyway). Each ending is applied once: its row is deleted in the transaction that
applies it, taken FOR UPDATE SKIP LOCKED, and a child's countdown is a locking update.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from pymysql.constants import SERVER_STATUS

from ..workflows import BAD_ENDINGS, ENDINGS, Workflows
from .schema import NOW

# The trigger's read of the edges is a locking read: a plain one would use the read view
# its statement opened before it waited for a dependent's enqueue to let go of the parent.
RECORD = f"""
    CREATE TRIGGER jobq_workflow_record AFTER UPDATE ON jobq_jobs FOR EACH ROW
    BEGIN
        DECLARE dependents INT DEFAULT 0;
        IF (OLD.status NOT IN ({ENDINGS}) AND NEW.status IN ({ENDINGS}))
           OR (OLD.status IN ({BAD_ENDINGS}) AND NEW.status IN ('pending', 'waiting')) THEN
            SELECT COUNT(*) INTO dependents FROM jobq_dependencies
                WHERE parent = NEW.id LOCK IN SHARE MODE;
            IF dependents > 0 THEN
                INSERT INTO jobq_workflow_endings (parent, status) VALUES (NEW.id,
                    IF(NEW.status IN ({ENDINGS}), NEW.status, 'revived'));
            END IF;
        END IF;
    END
"""

WORKFLOWS: tuple[str, ...] = (
    # One statement, so that it applies whole or not at all. The status is a VARCHAR with no
    # check: 'waiting' needs no change, and it sorts outside the ready indexes' 'pending'.
    "ALTER TABLE jobq_jobs ADD COLUMN waiting_for INT NULL, ADD COLUMN cancelled_by BIGINT NULL, "
    "ADD COLUMN batch_id BIGINT NULL, ADD KEY jobq_jobs_batches (batch_id, status)",
    """
    CREATE TABLE IF NOT EXISTS jobq_dependencies (
        parent BIGINT NOT NULL, child BIGINT NOT NULL,
        any_ending BOOLEAN NOT NULL DEFAULT FALSE, PRIMARY KEY (parent, child),
        KEY jobq_dependencies_child (child, parent)
    ) ENGINE=InnoDB
    """,
    """
    CREATE TABLE IF NOT EXISTS jobq_workflow_endings (
        id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, parent BIGINT NOT NULL,
        status VARCHAR(16) NOT NULL
    ) ENGINE=InnoDB
    """,
    RECORD,
    # A pruned job's edges to its parents go with it: the table does not outgrow the jobs.
    "CREATE TRIGGER jobq_workflow_forget AFTER DELETE ON jobq_jobs FOR EACH ROW "
    "DELETE FROM jobq_dependencies WHERE child = OLD.id",
)

DEPENDENTS = "jobq_jobs c JOIN jobq_dependencies d ON d.child = c.id"

# MySQL assigns SET columns left to right, each seeing the ones before: the status is
# decided on the countdown as it was. A batch's `then` counts down every ending of its
# members (any_ending); a dependent enqueued after= counts down completions only.
RELEASE = f"""
    UPDATE {DEPENDENTS} SET
        c.status = CASE WHEN c.status = 'waiting' AND c.waiting_for = 1
            THEN 'pending' ELSE c.status END,
        c.waiting_for = c.waiting_for - 1, c.updated_at = {NOW}
    WHERE d.parent = %(parent)s AND (%(status)s = 'completed' OR d.any_ending)
"""

# A retried batch member is waited for again by its batch's `then`, if that still waits.
REJOIN = f"""
    UPDATE {DEPENDENTS} SET c.waiting_for = c.waiting_for + 1
    WHERE d.parent = %(parent)s AND d.any_ending AND c.status = 'waiting'
"""

CANCEL = f"""
    UPDATE {DEPENDENTS} SET c.status = 'cancelled', c.cancelled_by = %(parent)s,
        c.finished_at = {NOW}, c.updated_at = {NOW},
        c.last_error = CONCAT('Parent job ', %(parent)s, ' ended ', %(status)s)
    WHERE d.parent = %(parent)s AND NOT d.any_ending AND c.status = 'waiting'
"""

# Read first, then revived by id: MySQL cannot read the table an UPDATE changes.
REVIVABLE = f"""
    SELECT c.id FROM {DEPENDENTS}
    WHERE d.parent = %(parent)s AND NOT d.any_ending AND c.status = 'cancelled'
      AND c.cancelled_by IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM jobq_dependencies o JOIN jobq_jobs p ON p.id = o.parent
                      WHERE o.child = c.id AND p.id <> %(parent)s AND p.status IN ({BAD_ENDINGS}))
    FOR UPDATE
"""
REVIVE = f"""
    UPDATE jobq_jobs SET status = 'waiting', cancelled_by = NULL, finished_at = NULL,
        last_error = NULL, updated_at = {NOW}
    WHERE id = %(id)s AND status = 'cancelled'
"""

# Endings applied a round: the rest wait for the next round of the same transaction.
ENDINGS_A_ROUND = 50


class MysqlWorkflows(Workflows):
    lock_rows = " LOCK IN SHARE MODE"
    sql_complete: ClassVar[str]

    def completing(self, params: dict[str, Any]) -> bool:
        """The acknowledgement and the endings it recorded, in one transaction: the caller's
        when one is open (an acknowledgement fused with the next claim), else its own."""
        with self.in_a_transaction():
            done = self.execute(self.sql_complete, params) == 1
            self.apply_endings()
        return done

    @contextmanager
    def in_a_transaction(self) -> Iterator[None]:
        """The transaction open on this connection, else one of its own."""
        if self.connection.server_status & SERVER_STATUS.SERVER_STATUS_IN_TRANS:
            yield
            return
        with self.transaction():
            yield

    def apply_endings(self) -> None:
        """Apply the recorded endings, inside the caller's transaction, until none is left
        that another transaction is not applying (a cancelled dependent records its own)."""
        while rows := self.fetchall(
            "SELECT id, parent, status FROM jobq_workflow_endings ORDER BY id "
            f"LIMIT {ENDINGS_A_ROUND} FOR UPDATE SKIP LOCKED"
        ):
            for _, parent, status in rows:
                self.apply_ending(int(parent), str(status))
            marks, params = self.marks("ending", [int(row[0]) for row in rows])
            self.execute(f"DELETE FROM jobq_workflow_endings WHERE id IN ({marks})", params)

    def apply_ending(self, parent: int, status: str) -> None:
        params: dict[str, Any] = {"parent": parent, "status": status}
        if status == "revived":
            self.execute(REJOIN, params)
            for (child,) in self.fetchall(REVIVABLE, params):
                self.execute(REVIVE, {"id": int(child)})
            return
        self.execute(RELEASE, params)
        if status != "completed":
            self.execute(CANCEL, params)
