"""PostgreSQL's key locks as advisory locks (limits.key_lock), in place of the lock of each
key's row in jobq_limit_keys: the concurrency admit, fill and release, and the rate admit.

A row lock is a write: each wrote a WAL record, two a limited job (its claim's and its
ending's), and a key never claimed before had its row inserted first, which concurrent
claims of that key waited on. A transaction-scoped advisory lock writes nothing, and is held
until the commit as the row lock was, so a trigger that takes a key still counts with a
snapshot that sees every earlier holder's commit. A claim's trigger tries (it never waits,
as SKIP LOCKED did not); an ending's waits, after the statement locked its keys in sorted
order (claims.HELD_KEYS).

jobq_limit_keys stays, unwritten: during a rolling upgrade the workers of the earlier
release still lock its rows in their fused statements' sorted prelude and in their wake-ups.
Those rows no longer guard any count (the triggers, which count, are the database's and
changed for every client at once), so an earlier release's worker stays within the limits;
what it loses until it is replaced is its prelude's ordering, so its fused statements may
deadlock now and then (PostgreSQL detects it, and the statement is rerun), and its wake-up
of a lapsed key may wake a job the admit then blocks again.
"""

from __future__ import annotations

from .idle import IDLE_NOTIFY
from .limits import FILL_GUARD, WAKE_HELD, admit, fill, key_lock, release
from .rates import admit as rate_admit

TRY = "pg_try_advisory_xact_lock"

ADMIT_HOLD = f"""IF NOT {key_lock("NEW.type", "NEW.limit_key", TRY)} THEN
            RETURN OLD;
        END IF;"""
FILL_HOLD = f"""IF NOT {key_lock("NEW.type", "NEW.limit_key", TRY)} THEN
            RETURN NULL;
        END IF;"""
RELEASE_HOLD = f"PERFORM {key_lock('OLD.type', 'OLD.limit_key')};"
RATE_HOLD = f"""IF NOT {key_lock("NEW.type", "NEW.rate_key", TRY)} THEN
            RETURN OLD;
        END IF;"""

# The upgrade's instant: a transaction that took a key's row under the triggers before
# could meet one that takes the key's advisory lock under the triggers after, each counting
# without seeing the other. Holding the table against row locks first, the upgrade waits
# for every transaction holding a key's row to end, and keeps new ones from taking one
# until the new triggers are in (EXCLUSIVE conflicts with the ROW SHARE of FOR UPDATE, not
# with reads). A statement that entered the old trigger's body within the upgrade's few
# milliseconds can still count unseen once, then never again.
HOLD_KEY_ROWS = "LOCK TABLE jobq_limit_keys IN EXCLUSIVE MODE"

KEY_LOCKS: tuple[str, ...] = (
    HOLD_KEY_ROWS,
    admit("CREATE OR REPLACE", ADMIT_HOLD),
    fill("CREATE OR REPLACE", FILL_GUARD, FILL_HOLD),
    release("CREATE OR REPLACE", WAKE_HELD, RELEASE_HOLD, IDLE_NOTIFY),
    rate_admit("CREATE OR REPLACE", RATE_HOLD),
)
