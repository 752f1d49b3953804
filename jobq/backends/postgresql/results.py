"""PostgreSQL's statements for what an attempt leaves besides its outcome: the result and
error columns, the attempt history, progress and checkpoints, and the wake-up of a waiter
when a job it waits for ends."""

from __future__ import annotations

import time
from typing import Any

import psycopg

from ...retry import MAX_ATTEMPTS
from ..reporting import Reporting
from ..shapes import attempt_entry, history_appended
from .schema import in_progress

# Tells the sessions waiting for a job (Queue.wait) that it ended: the payload is its id.
FINISHED_CHANNEL = "jobq_finished"

# The results' columns; the history as JSON text, like every backend's. `waited` marks a job
# someone waits for: only its end notifies, so no other acknowledgement pays for a NOTIFY
# (which serialises the commits that send one). A trigger sends it, whichever statement ends
# the job: completion, failure, cancel, expiry, recovery. Its WHEN clause is all an
# unwaited row costs. Columns with no default, or a constant one, rewrite no rows.
RESULTS: tuple[str, ...] = (
    "ALTER TABLE jobq_jobs ADD COLUMN result text, ADD COLUMN error_class text, "
    "ADD COLUMN progress text, ADD COLUMN checkpoint text, "
    "ADD COLUMN attempt_log text, ADD COLUMN started_at timestamptz, "
    "ADD COLUMN attempted_at timestamptz, ADD COLUMN waited boolean NOT NULL DEFAULT false",
    f"""
    CREATE FUNCTION jobq_notify_finished() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('{FINISHED_CHANNEL}', NEW.id::text);
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER jobq_jobs_finished AFTER UPDATE OF status ON jobq_jobs FOR EACH ROW
    WHEN (NEW.waited AND NEW.status IN ('completed', 'failed', 'expired', 'cancelled')
          AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION jobq_notify_finished()
    """,
)


def logged(
    error: str = "NULL",
    error_class: str = "NULL",
    began: str = "attempted_at",
    ended: str = "now()",
) -> str:
    """The SET of attempt_log that appends the ending attempt (see shapes.attempt_entry),
    which began and ended at the moments `began` and `ended`."""
    entry = attempt_entry(
        "jsonb_build_object",
        started=f"extract(epoch FROM {began})",
        finished=f"extract(epoch FROM {ended})",
        error=f"{error}::text",
        error_class=f"{error_class}::text",
    )
    log, length, append = (
        "coalesce(attempt_log::jsonb, '[]'::jsonb)",
        "jsonb_array_length({log})",
        ("({log} || jsonb_build_array({entry}))::text"),
    )
    return history_appended(log, length, append, entry)


# The attempt, while it holds its job: its suspension does not count (see Reporting).
UNCOUNT = f"""
    UPDATE jobq_jobs SET max_attempts = least(max_attempts + 1, {MAX_ATTEMPTS})
    WHERE id = %(id)s AND token = %(token)s AND {in_progress()}
"""


# The attempt, while it still holds its job and its lease: {column} is progress or checkpoint.
ATTEMPT_WRITE = f"""
    UPDATE jobq_jobs SET {{column}} = %(value)s
    WHERE id = %(id)s AND token = %(token)s AND {in_progress()} AND lease_until > now()
"""


# Marks a job someone waits for, so that its end notifies: run once the waiter listens, by
# Queue.wait and AsyncQueue.wait alike.
MARK_WAITED = "UPDATE jobq_jobs SET waited = true WHERE id = %(id)s AND NOT waited"


class PostgresReporting(Reporting):
    connection: psycopg.Connection[Any]
    pooled: bool
    sql_attempt_write = ATTEMPT_WRITE
    sql_uncount = UNCOUNT

    def watch(self, job_id: int) -> bool:
        # Behind a transaction pooler the LISTEN would hold on one server connection and the
        # wait read another: a waiter polls there.
        if self.pooled:
            return False
        self.execute(f"LISTEN {FINISHED_CHANNEL}")
        # After the LISTEN: an end that commits once the mark has is notified, and one
        # before it is seen by the waiter's next read of the row.
        self.execute(MARK_WAITED, {"id": job_id})
        return True

    def wait_for_end(self, job_id: int, timeout: float) -> None:
        wanted = str(job_id)
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            notes = list(self.connection.notifies(timeout=left, stop_after=1))
            if not notes or any(
                note.channel == FINISHED_CHANNEL and note.payload == wanted for note in notes
            ):
                return

    def unwatch(self) -> None:
        self.execute(f"UNLISTEN {FINISHED_CHANNEL}")
