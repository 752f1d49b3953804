"""PostgreSQL's count of a concurrency key's live attempts from the key's floor: the oldest
attempt of the key still in progress when the session last counted it, so that the count
steps over only the attempts that ended since, not every one that ever ran.

Why. The admit, the fill, the endings and a batched acknowledgement's successors each count
the key's attempts in progress (limits.RUNNING) through an index of in-progress attempts.
While any transaction holds an old snapshot, every attempt of the key that ended since keeps
its entry there (vacuum may not remove it, no walk may mark it dead), and each count stepped
over all of them: 10,000 entries after 10,000 jobs of one key
(tests/integration/test_held_horizon_limits.py).

The options weighed:
- a narrower index (type, limit_key) of in-progress attempts is what that count already read:
  the key's dead entries are in it;
- a count kept in the key's row (jobq_limit_keys), or a row per slot, is a row updated twice
  a job, whose versions the same snapshot keeps: a chain every count would walk instead (the
  claim cursor's reason for keeping its cursor out of a table, cursors.py); and a counter
  cannot free the slot of an attempt whose lease ran out before maintenance settles it;
- order: each claim of a limited job takes a number from a sequence (claim_seq), and the
  key's attempts in progress are indexed by it. A claim takes its number under the key's lock
  (the admit's, or the batched acknowledgement's, claims.HELD_KEYS), so a count made under
  the lock sees every attempt numbered before and none is numbered lower after. The lowest
  number in progress then is a floor below which no attempt of the key will ever be in
  progress again: an attempt that ends never starts again (a retry is a new claim, with a new
  number). A count from the floor reads the key's live attempts and those that ended since
  the oldest of them started; this one.
So the count and its new floor are one walk, and the floor is kept in the session's settings
(as the claim cursor is: no table, no write), in one of FLOOR_PLACES places chosen by the
key's hash, holding the key it is for: bounded memory however many keys, and a key that
meets another in its place only counts from its head once. A place also names the
sequence's oid, so a floor outlives no reinstall. A floor is only a lower bound: a pooler
that hands the session to another client of the database hands it a floor that holds there
too.

The bound: a count reads the attempts of its key that ended since its oldest live attempt
started, and its session's first count of a key all of them. An attempt claimed while its
type had no limit takes its number without the lock: if a limit is declared while it runs,
a count may miss it, as a count that read no limit missed it before.
"""

from __future__ import annotations

from .key_locks import ADMIT_HOLD, FILL_HOLD
from .limits import FILL_GUARD, RUNNING, admit, fill

# Places for floors in a session's settings: a bounded set of custom settings, however many
# keys the session counts.
FLOOR_PLACES = 1024

SEQUENCE = "jobq_claim_seq"

COUNT = f"""
    CREATE FUNCTION jobq_key_running(key_type text, key text) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SET jit = off AS $$
    DECLARE
        mark text := md5(key_type || chr(31) || key) || ':' || '{SEQUENCE}'::regclass::oid;
        place text := 'jobq.limit_floor_' || (hashtext(mark) & {FLOOR_PLACES - 1});
        kept text := current_setting(place, true);
        floor bigint := 0;
        live bigint;
        oldest bigint;
    BEGIN
        IF split_part(kept, '|', 1) = mark THEN
            floor := split_part(kept, '|', 2)::bigint;
        END IF;
        SELECT count(*) FILTER (WHERE r.lease_until > now()), min(r.claim_seq)
        INTO live, oldest
        FROM jobq_jobs r WHERE r.type = key_type AND r.limit_key = key
          AND r.status = 'in_progress' AND r.claim_seq >= floor;
        -- None in progress: every later claim of the key takes a higher number.
        IF oldest IS NULL THEN
            SELECT last_value INTO oldest FROM {SEQUENCE};
        END IF;
        PERFORM set_config(place, mark || '|' || oldest, false);
        RETURN live;
    END
    $$
"""

# Every attempt of a limited job takes its number as it starts, after the admit (triggers
# fire in name order, and a WHEN clause reads the row as the triggers before left it): a claim
# the admit refused or blocked takes none.
NUMBER = f"""
    CREATE FUNCTION jobq_limit_number() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.claim_seq := nextval('{SEQUENCE}');
        RETURN NEW;
    END
    $$
"""


def counted(sql: str, row: str, running: str) -> str:
    """`sql` with its count of the key's attempts (`running`, for the key of `row`) made from
    the key's floor."""
    counting = f"jobq_key_running({row}.type, {row}.limit_key)"
    replaced = sql.replace(running, counting)
    assert replaced != sql, "no count to replace"
    return replaced


LIMIT_FLOORS: tuple[str, ...] = (
    # No default: adding the column rewrites no rows.
    "ALTER TABLE jobq_jobs ADD COLUMN claim_seq bigint",
    f"CREATE SEQUENCE {SEQUENCE}",
    # The attempts in progress now: the table is locked, no claim runs meanwhile.
    f"UPDATE jobq_jobs SET claim_seq = nextval('{SEQUENCE}') "
    "WHERE status = 'in_progress' AND limit_key IS NOT NULL",
    "CREATE INDEX jobq_jobs_limit_live ON jobq_jobs (type, limit_key, claim_seq) "
    "WHERE status = 'in_progress' AND limit_key IS NOT NULL",
    # The same key with the number after it: the operator's and maintenance's counts read
    # this one now.
    "DROP INDEX jobq_jobs_limit_running",
    COUNT,
    NUMBER,
    "CREATE TRIGGER jobq_limit_number BEFORE UPDATE OF status ON jobq_jobs FOR EACH ROW "
    "WHEN (OLD.status <> 'in_progress' AND NEW.status = 'in_progress' "
    "AND NEW.limit_key IS NOT NULL) EXECUTE FUNCTION jobq_limit_number()",
    counted(admit("CREATE OR REPLACE", ADMIT_HOLD), "NEW", RUNNING.format(row="NEW")),
    counted(fill("CREATE OR REPLACE", FILL_GUARD, FILL_HOLD), "NEW", RUNNING.format(row="NEW")),
)
