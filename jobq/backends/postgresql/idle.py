"""PostgreSQL's wake-ups of idle workers by a limit's ending, sent only while some worker may
be idle.

A NOTIFY costs its transaction a lock that PostgreSQL holds from the commit's start to its
end, WAL flush included, so that every notifying commit of the database waits for the one
before it. Each ending of a limited attempt that wakes its key's next job notified: with
each key's jobs enqueued together, that is every ending, and 2.6 to 3 backends of a drain
at 8 workers waited on that lock on average (wait event Lock/object). Yet a busy worker
needs no wake-up: its next claim finds the woken job. Only a worker waiting on LISTEN does.

So a worker marks itself idle before it waits, by holding IDLE shared for its session (a
session's advisory locks go with it, however it ends), and an ending notifies only when
IDLE cannot be taken exclusively, that is while some worker holds it. The race between the
two, an ending that looked before the mark and commits after the worker's last claim, is
closed by GATE: each such ending holds it shared until its commit, and a worker, once
marked, waits for GATE exclusively before its last claim, so that claim's snapshot sees
every ending that did not see the mark. An ending never waits for GATE: while a worker
holds or awaits it, the ending notifies. Endings therefore never wait for workers, and no
lock cycle can pass through these two.
"""

from __future__ import annotations

from typing import Any

from .controls import NOTIFY_CHANNEL
from .limits import LEANER_TRIGGERS, RELEASE_LOCK_FIRST, WAKE_HELD, release

# Advisory lock keys (bigint), next to the installer's 4242001.
IDLE = 4242002
GATE = 4242003


# The ending's wake-up. IDLE is taken and given back within one expression (a CASE,
# evaluated in order), so no cancel can fall between the two and leave it held. (In
# parentheses: PL/pgSQL would end the condition at the CASE's THEN.)
def idle_notify(job_type: str) -> str:
    """The wake-up of idle workers for `job_type`, an SQL expression."""
    return f"""IF NOT pg_try_advisory_xact_lock_shared({GATE}) THEN
                    PERFORM pg_notify('{NOTIFY_CHANNEL}', {job_type});
                ELSIF NOT (CASE WHEN pg_try_advisory_lock({IDLE})
                        THEN pg_advisory_unlock({IDLE}) ELSE false END) THEN
                    PERFORM pg_notify('{NOTIFY_CHANNEL}', {job_type});
                END IF;"""


IDLE_NOTIFY = idle_notify("OLD.type")

# Leaner triggers, and an ending that wakes idle workers only.
IDLE_WAKES: tuple[str, ...] = (
    *LEANER_TRIGGERS,
    release("CREATE OR REPLACE", WAKE_HELD, RELEASE_LOCK_FIRST, IDLE_NOTIFY),
)

MARK = f"SELECT pg_advisory_lock_shared({IDLE})"
# Its two calls run in order, in one expression: GATE is never left held. (A void result
# is not NULL.)
BARRIER = (
    f"SELECT CASE WHEN pg_advisory_lock({GATE}) IS NOT NULL THEN pg_advisory_unlock({GATE}) END"
)
UNMARK = f"SELECT pg_advisory_unlock_shared({IDLE})"


# The worker listens only while marked. psycopg keeps every notification a connection
# receives outside notifies() until notifies() reads it, and a worker reads one per idle
# wait: listening throughout, a busy worker kept one for each enqueue of its whole busy
# spell (5,000 kept after 5,000 enqueues), and a direct listen_dsn connection, read by no
# one while the worker was busy, left its server session behind on the notification queue.
# Listening from the mark on misses nothing: the claim the worker makes once marked reads a
# snapshot taken after its LISTEN committed.
LISTEN_AND_MARK = f"LISTEN {NOTIFY_CHANNEL}; {MARK}"
UNMARK_AND_UNLISTEN = f"{UNMARK}; UNLISTEN {NOTIFY_CHANNEL}"


class PostgresIdle:
    """A worker's idle mark, on the connection that listens."""

    connection: Any  # the backend's psycopg connection (Backend.__init__)
    listening: Any  # the direct connection that listens, when there is one
    marked = False

    def mark_idle(self) -> bool:
        if self.marked:
            return False
        connection = self.listening or self.connection
        # Wake-ups from before the mark, which came with the statements since the last
        # idle spell, are stale: the claim that follows sees what they announced.
        for _ in connection.notifies(timeout=0):
            pass
        connection.execute(LISTEN_AND_MARK)
        self.marked = True
        connection.execute(BARRIER)
        return True

    def unmark_idle(self) -> None:
        if self.marked:
            (self.listening or self.connection).execute(UNMARK_AND_UNLISTEN)
            self.marked = False
