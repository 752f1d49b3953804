"""MySQL's and MariaDB's workflows: for now only the schema, so that every database has
the same columns and statuses. A trigger there may not change the table its statement
changes, so a parent's ending cannot release its dependents the way PostgreSQL's and
SQLite's triggers do; until each acknowledgement does it itself, enqueue's after= is
refused here."""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import ConfigurationError
from ..rows import NewJob
from ..steps import Steps
from ..workflows import Workflows

WORKFLOWS: tuple[str, ...] = (
    # One statement, so that it applies whole or not at all. The status is a VARCHAR with no
    # check: 'waiting' needs no change, and it sorts outside the ready indexes' 'pending'.
    "ALTER TABLE jobq_jobs ADD COLUMN waiting_for INT NULL, ADD COLUMN cancelled_by BIGINT NULL",
    """
    CREATE TABLE IF NOT EXISTS jobq_dependencies (
        parent BIGINT NOT NULL, child BIGINT NOT NULL, PRIMARY KEY (parent, child),
        KEY jobq_dependencies_child (child, parent)
    ) ENGINE=InnoDB
    """,
)


class MysqlWorkflows(Workflows):
    lock_rows = " LOCK IN SHARE MODE"

    def add_after_steps(self, jobs: Sequence[NewJob], parents: Sequence[int]) -> Steps[list[int]]:
        raise ConfigurationError(
            "after=: jobs that wait for other jobs need PostgreSQL or SQLite; "
            "MySQL and MariaDB do not have them yet"
        )
