"""PostgreSQL's concurrency limits: the columns and tables, the trigger that admits or
blocks each claim of a limited job, the trigger that wakes a blocked job when an attempt of
its key ends (once a statement since the set-endings version: limit_endings.py), and the
operator's statements.

The triggers see every claim and every ending, whichever statement makes it (a claim, a
batch, an acknowledgement fused with the next claim, a settle, a cancel, a release, the
recovery of an ended lease), so no path can skip them. Both lock the key first (its row in
jobq_limit_keys, and from the key-locks version on an advisory lock: key_locks.py): its
claims and its endings are serialised, and each counts the key's live attempts with a fresh
snapshot (a plpgsql statement takes one), not the one its outer statement started with.
"""

from __future__ import annotations

import re

from ...limits import CONCURRENCY
from ..limits import PER_IN_FORCE, Limits, limited_work_statement, shared_statements
from .controls import NOTIFY_CHANNEL, OLDEST_READY
from .schema import ANY_TYPE, NEXT_READY, PROBE, READY, SETTINGS

# Attempts of the trigger row's key that hold a slot: in progress with a live lease. A lease
# that ended frees its slot even before maintenance settles the row (a killed master).
RUNNING = """(SELECT count(*) FROM jobq_jobs r WHERE r.type = {row}.type
    AND r.limit_key = {row}.limit_key AND r.status = 'in_progress' AND r.lease_until > now())"""

# The limit in force: an operator's override, else the job class's declaration.
ALLOWED = f"""SELECT coalesce(l.override, l.declared) INTO allowed FROM jobq_limits l
    WHERE l.type = {{row}}.type AND l.name = '{CONCURRENCY}'"""

KEY_ROW = """INSERT INTO jobq_limit_keys (type, limit_key) VALUES ({row}.type, {row}.limit_key)
    ON CONFLICT DO NOTHING"""

# The key's row, locked: {wait} is " SKIP LOCKED" or nothing.
HOLD_KEY = """PERFORM FROM jobq_limit_keys k WHERE k.type = {row}.type
            AND k.limit_key = {row}.limit_key FOR UPDATE{wait}"""

# A key's lock, from the key-locks schema version on: a transaction-scoped advisory lock on
# the hash of the type and the key, in place of the lock of the key's row in
# jobq_limit_keys. Each row lock wrote a WAL record (two a limited job, claim and ending);
# an advisory lock writes none, and needs no row made first. Two-int keys, under a class of
# jobq's own, so that they never meet the application's one-int (bigint) advisory locks; two
# keys whose hashes collide share one lock, which only serialises them. (chr(31), the unit
# separator, keeps ("a", "bc") and ("ab", "c") apart.)
KEY_LOCK_CLASS = 4242004


def key_hash(type_: str, key: str) -> str:
    """The second int of a key's lock, from SQL expressions for its type and key."""
    return f"hashtext({type_} || chr(31) || {key})"


def key_lock(type_: str, key: str, take: str = "pg_advisory_xact_lock") -> str:
    """A call that takes a key's lock: `take` is pg_advisory_xact_lock (waits) or
    pg_try_advisory_xact_lock (true when taken; like SKIP LOCKED, it never waits, and a lock
    this transaction holds already is taken again)."""
    return f"{take}({KEY_LOCK_CLASS}, {key_hash(type_, key)})"


# A claim skips a key another claim or ending holds (SKIP LOCKED): the job stays ready,
# unclaimed, and no claim ever waits on another's key, so batches cannot deadlock.
ADMIT_HOLD = f"""{KEY_ROW.format(row="NEW")};
        {HOLD_KEY.format(row="NEW", wait=" SKIP LOCKED")};
        IF NOT FOUND THEN
            RETURN OLD;
        END IF;"""


def admit(create: str, hold: str) -> str:
    """The claim's trigger function: `hold` takes the key's row (or returns OLD, the claim
    refused), then the key's attempts are counted. Over the limit, the job is marked blocked
    (blocked_on), which takes it out of the ready indexes (see BLOCKED_APART), until an
    ending of its key wakes it."""
    return f"""
    {create} FUNCTION jobq_limit_admit() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        allowed integer;
    BEGIN
        {ALLOWED.format(row="NEW")};
        IF allowed IS NULL THEN
            RETURN NEW;
        END IF;
        {hold}
        IF {RUNNING.format(row="NEW")} >= allowed THEN
            NEW := OLD;
            NEW.blocked_on := '{CONCURRENCY}';
        END IF;
        RETURN NEW;
    END
    $$
"""


ADMIT = admit("CREATE", ADMIT_HOLD)

# The best {how_many} jobs blocked on the trigger row's key, unblocked, their count added
# to `woken`; {skip} is "SKIP LOCKED" or nothing.
WAKE = """WITH unblocked AS (
                UPDATE jobq_jobs j SET blocked_on = NULL WHERE j.id IN (
                    SELECT b.id FROM jobq_jobs b WHERE b.type = OLD.type
                      AND b.limit_key = OLD.limit_key AND b.status = 'pending'
                      AND b.blocked_on IS NOT NULL
                    ORDER BY b.priority DESC, b.scheduled_at, b.id LIMIT {how_many}
                    FOR UPDATE {skip})
                RETURNING 1
            )
            SELECT woken + count(*) INTO woken FROM unblocked"""

# How long an ending waits for a blocked job's row another transaction holds (see
# WAKE_HELD): such a holder is one claim statement from its commit.
HELD_ROW_WAIT = "200ms"

# A row that a concurrent claim locked is skipped by the wake (SKIP LOCKED). That claim's
# probe read a snapshot from before the job was blocked, reached the row after the block
# committed, and READ COMMITTED's recheck stepped over it; but the row stays locked until
# that claim commits, and the job, blocked with a slot free, would wait for maintenance
# (tests/integration/test_limit_races.py replays it). So when the wake woke fewer jobs than
# there are free slots and blocked jobs of the key remain, the ending waits for them. Only
# then: a subtransaction per ending would cost every claim. The holder has passed its probe
# and waits for no key (claims.HELD_KEYS), so the wait is short; a wait that is part of a
# cycle anyway (two endings each waiting for a row the other's claim holds) gives up at
# HELD_ROW_WAIT or on deadlock_detected, and maintenance's stranded sweep wakes the job.
# The timeout is set within the block, which its error undoes and its end restores.
WAKE_HELD = f"""
            IF woken < free AND EXISTS (SELECT FROM jobq_jobs b WHERE b.type = OLD.type
                    AND b.limit_key = OLD.limit_key AND b.status = 'pending'
                    AND b.blocked_on IS NOT NULL) THEN
                BEGIN
                    timeout := current_setting('lock_timeout');
                    PERFORM set_config('lock_timeout', '{HELD_ROW_WAIT}', true);
                    {WAKE.format(how_many="free - woken", skip="")};
                    PERFORM set_config('lock_timeout', timeout, true);
                EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
                    NULL;
                END;
            END IF;"""


RELEASE_HOLD = f"""{KEY_ROW.format(row="OLD")};
        {HOLD_KEY.format(row="OLD", wait="")};"""


# The wake-up of idle workers once the ending woke a job.
NOTIFY = f"PERFORM pg_notify('{NOTIFY_CHANNEL}', OLD.type);"


def release(create: str, wake_held: str, hold: str = RELEASE_HOLD, notify: str = NOTIFY) -> str:
    """The ending's trigger function: after every row of the statement (so after the claims
    a fused statement makes too), wait for the key (`hold`), count again, wake as many
    blocked jobs as there are free slots, best first, and then `notify`."""
    return f"""
    {create} FUNCTION jobq_limit_release() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        allowed integer;
        free integer;
        woken integer := 0;
        timeout text;
    BEGIN
        {ALLOWED.format(row="OLD")};
        {hold}
        free := coalesce(allowed, 1000000) - {RUNNING.format(row="OLD")};
        IF free > 0 THEN
            {WAKE.format(how_many="free", skip="SKIP LOCKED")};{wake_held}
            IF woken > 0 THEN
                {notify}
            END IF;
        END IF;
        RETURN NULL;
    END
    $$
"""


RELEASE = release("CREATE", "")


# The fill's hold of the key's row (key_locks.py has its advisory lock since).
FILL_HOLD = """PERFORM FROM jobq_limit_keys k WHERE k.type = NEW.type
            AND k.limit_key = NEW.limit_key FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;"""


# When a claim fills its key (or finds it full), the key's other ready jobs are blocked at
# once, in the claim's transaction, which holds the key. Otherwise every probe met them one
# by one: each blocked one row a statement, and while the filling claim had not committed,
# each concurrent claim found the key held, left the row ready, and met it again. With each
# key's jobs enqueued together, that was four claim statements a job. A job blocked here
# is as safe as one the admit blocked: the key is held and counted full, so each of its
# attempts in progress ends by the release trigger, which wakes as many as free slots.
# Only ready jobs: a job due later would take a wake-up it cannot use. Rows another claim
# holds are left ready (SKIP LOCKED) for the admit to weigh. An AFTER trigger, because a
# BEFORE trigger that changes another row the statement then claims makes it fail.
def fill(create: str, guard: str = "", hold: str = FILL_HOLD) -> str:
    """The fill's trigger function; `guard`, statements it runs first; `hold` takes the
    key (or returns, leaving the key's jobs to the admit)."""
    return f"""
    {create} FUNCTION jobq_limit_fill() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        allowed integer;
    BEGIN
        {guard}{ALLOWED.format(row="NEW")};
        IF allowed IS NULL OR {RUNNING.format(row="NEW")} < allowed THEN
            RETURN NULL;
        END IF;
        {hold}
        UPDATE jobq_jobs j SET blocked_on = '{CONCURRENCY}' WHERE j.id IN (
            SELECT b.id FROM jobq_jobs b WHERE b.type = NEW.type
              AND b.limit_key = NEW.limit_key AND {READY.replace("status", "b.status")}
              AND b.blocked_on IS NULL
            FOR UPDATE SKIP LOCKED);
        RETURN NULL;
    END
    $$
"""


FILL = fill("CREATE")

# Most fills find nothing to block: the key's other jobs were blocked by the first claim
# that filled it, and each ending wakes one, whose claim fills again; and a batch that
# refuses several jobs of one key fills once per refusal. One probe of the key's ready jobs
# (jobq_jobs_limit_ready) now comes first, in place of the limit, the count, the key's lock
# and an empty update: 19,000 of 20,000 fills of a drain of keys taking turns found none.
FILL_GUARD = f"""IF NOT EXISTS (SELECT FROM jobq_jobs b WHERE b.type = NEW.type
            AND b.limit_key = NEW.limit_key AND {READY.replace("status", "b.status")}
            AND b.blocked_on IS NULL) THEN
            RETURN NULL;
        END IF;
        """

# The ending's wake-up waits for blocked rows a concurrent claim holds; a full key's ready
# jobs are blocked together, found through an index of them.
LIMIT_WAKES: tuple[str, ...] = (
    release("CREATE OR REPLACE", WAKE_HELD),
    "CREATE INDEX jobq_jobs_limit_ready ON jobq_jobs (type, limit_key) "
    "WHERE status = 'pending' AND blocked_on IS NULL AND limit_key IS NOT NULL",
    FILL,
    "CREATE TRIGGER jobq_limit_fill AFTER UPDATE OF status ON jobq_jobs FOR EACH ROW "
    "WHEN (OLD.status = 'pending' AND NEW.limit_key IS NOT NULL "
    "AND (NEW.status = 'in_progress' OR NEW.blocked_on IS NOT NULL)) "
    "EXECUTE FUNCTION jobq_limit_fill()",
)

# The key's row locked first, and made only when missing: it exists for every key claimed
# before, so the insert (a unique-index probe per claim and per ending) was wasted nearly
# always.
ADMIT_LOCK_FIRST = f"""{HOLD_KEY.format(row="NEW", wait=" SKIP LOCKED")};
        IF NOT FOUND THEN
            {KEY_ROW.format(row="NEW")};
            {HOLD_KEY.format(row="NEW", wait=" SKIP LOCKED")};
            IF NOT FOUND THEN
                RETURN OLD;
            END IF;
        END IF;"""
RELEASE_LOCK_FIRST = f"""{HOLD_KEY.format(row="OLD", wait="")};
        IF NOT FOUND THEN
            {KEY_ROW.format(row="OLD")};
            {HOLD_KEY.format(row="OLD", wait="")};
        END IF;"""

# The triggers' leaner bodies (see ADMIT_LOCK_FIRST and FILL_GUARD); the release's is
# idle.py's.
LEANER_TRIGGERS: tuple[str, ...] = (
    admit("CREATE OR REPLACE", ADMIT_LOCK_FIRST),
    fill("CREATE OR REPLACE", FILL_GUARD),
)

# The claim probes again, stepping over blocked jobs. CREATE OR REPLACE sets a function's
# settings anew, so this one says NO_JIT's too.
UNBLOCKED_READY = f"{READY} AND blocked_on IS NULL"
UNBLOCKED_PROBE = PROBE.replace(READY, UNBLOCKED_READY)
NEXT_UNBLOCKED = (
    NEXT_READY.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")
    .replace(READY, UNBLOCKED_READY)
    .replace(SETTINGS, f"{SETTINGS} SET jit = off")
)
UNBLOCKED_MANY = NEXT_UNBLOCKED.replace(
    "jobq_next_ready(job_type text)", "jobq_ready_many(job_type text, how_many integer)"
).replace("LIMIT 1", "LIMIT how_many")

LIMITS: tuple[str, ...] = (
    # No defaults: adding the columns rewrites no rows.
    "ALTER TABLE jobq_jobs ADD COLUMN limit_key text, ADD COLUMN blocked_on text",
    "CREATE TABLE jobq_limits (type text NOT NULL, name text NOT NULL, declared integer, "
    "override integer, PRIMARY KEY (type, name))",
    "CREATE TABLE jobq_limit_keys (type text NOT NULL, limit_key text NOT NULL, "
    "PRIMARY KEY (type, limit_key))",
    "CREATE INDEX jobq_jobs_limit_running ON jobq_jobs (type, limit_key) "
    "WHERE status = 'in_progress' AND limit_key IS NOT NULL",
    "CREATE INDEX jobq_jobs_limit_blocked ON jobq_jobs "
    "(type, limit_key, priority DESC, scheduled_at, id) "
    "WHERE status = 'pending' AND blocked_on IS NOT NULL",
    ADMIT,
    "CREATE TRIGGER jobq_limit_admit BEFORE UPDATE OF status ON jobq_jobs FOR EACH ROW "
    "WHEN (OLD.status = 'pending' AND NEW.status = 'in_progress' "
    "AND NEW.limit_key IS NOT NULL) EXECUTE FUNCTION jobq_limit_admit()",
    RELEASE,
    "CREATE TRIGGER jobq_limit_release AFTER UPDATE OF status ON jobq_jobs FOR EACH ROW "
    "WHEN (OLD.status = 'in_progress' AND NEW.status <> 'in_progress' "
    "AND OLD.limit_key IS NOT NULL) EXECUTE FUNCTION jobq_limit_release()",
    NEXT_UNBLOCKED,
    UNBLOCKED_MANY,
)

# The oldest-ready skip-scan with the blocked jobs left out, as the ready indexes leave them.
OLDEST_UNBLOCKED = re.sub(
    r"\b(j\.)?status = 'pending'", r"\g<0> AND \1blocked_on IS NULL", OLDEST_READY
)

# Blocked jobs leave the ready indexes, so that a claim's walk never steps over them: 20,000
# jobs blocked ahead of a ready one cost every claim a walk past their 20,000 entries. The
# probes already say `blocked_on IS NULL`, which implies the new predicates. The indexes
# keep their names, and no statement a release sends names an index on PostgreSQL.
BLOCKED_APART: tuple[str, ...] = (
    "DROP INDEX jobq_jobs_ready_any",
    "CREATE INDEX jobq_jobs_ready_any ON jobq_jobs (priority DESC, scheduled_at, id) "
    f"WHERE status = 'pending' AND {ANY_TYPE} AND blocked_on IS NULL",
    "DROP INDEX jobq_jobs_ready_by_type",
    "CREATE INDEX jobq_jobs_ready_by_type ON jobq_jobs (type, priority DESC, scheduled_at, id) "
    "WHERE status = 'pending' AND blocked_on IS NULL",
    "CREATE OR REPLACE FUNCTION jobq_oldest_ready() RETURNS TABLE (type text, oldest timestamptz) "
    f"LANGUAGE sql STABLE SET jit = off AS $$ {OLDEST_UNBLOCKED} $$",
)


class PostgresLimits(Limits):
    sql_declare_limit = """
        INSERT INTO jobq_limits (type, name, declared, declared_per)
        VALUES (%(type)s, %(name)s, %(count)s, %(per)s)
        ON CONFLICT (type, name) DO UPDATE
        SET declared = excluded.declared, declared_per = excluded.declared_per
        WHERE (jobq_limits.declared, jobq_limits.declared_per)
            IS DISTINCT FROM (excluded.declared, excluded.declared_per)
    """
    sql_override_limit = """
        INSERT INTO jobq_limits (type, name, override, override_per)
        VALUES (%(type)s, %(name)s, %(count)s, %(per)s)
        ON CONFLICT (type, name) DO UPDATE
        SET override = excluded.override, override_per = excluded.override_per
    """
    # A raised limit must reach the jobs already blocked: all of the type's go back to the
    # ready index, and the claims block again those still over it.
    sql_unblock_type = """
        WITH unblocked AS (
            UPDATE jobq_jobs SET blocked_on = NULL
            WHERE type = %(type)s AND status = 'pending' AND blocked_on IS NOT NULL
            RETURNING type
        )
        SELECT pg_notify(%(channel)s, %(type)s) WHERE EXISTS (SELECT FROM unblocked)
    """
    sql_limits, sql_lapsed_keys, sql_stranded_keys, sql_free_slots, sql_limit_of = (
        shared_statements(
            "now()",
            f"now() - make_interval(secs => {PER_IN_FORCE})",
            "%(type)s",
            "%(key)s",
            "%(id)s",
        )
    )
    sql_limited_work = limited_work_statement("now()", "%(most)s")
    sql_hold_key = (
        f"SELECT 1 WHERE {key_lock('%(type)s::text', '%(key)s::text', 'pg_try_advisory_xact_lock')}"
    )
    # One row per job woken; the wake-up of idle workers goes out with the commit.
    sql_wake_key = """
        WITH unblocked AS (
            UPDATE jobq_jobs j SET blocked_on = NULL WHERE j.id IN (
                SELECT b.id FROM jobq_jobs b WHERE b.type = %(type)s
                  AND b.limit_key = %(key)s AND b.status = 'pending'
                  AND b.blocked_on IS NOT NULL
                ORDER BY b.priority DESC, b.scheduled_at, b.id LIMIT %(free)s
                FOR UPDATE SKIP LOCKED)
            RETURNING j.type
        )
        SELECT pg_notify(%(channel)s, type) FROM unblocked
    """
