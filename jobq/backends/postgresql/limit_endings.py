"""PostgreSQL's wake-up of blocked jobs as a statement's endings free their keys' slots: once a
statement, over every limited attempt it ended, in place of once a row.

The row trigger (limits.release) ran its own five to seven statements for each ending: the
limit, the key's lock, a count, the wake-up and its checks, each a call into PL/pgSQL and a
plan to run. A batch acknowledged together shares that work: one lock per key, one count per
key, one update that wakes the best blocked jobs of every key with a free slot. (In a drain
of 1,000 keys at a limit of one, perf put a third of PostgreSQL's CPU in the row triggers
after the claims; this saved about a tenth of the drain's server time, since the wake-up's
row writes, most of what remains, are the same.)

A statement trigger sees the statement's rows through its transition tables, so it fires
after every UPDATE of jobq_jobs (no column list is allowed with them); one that ended no
limited attempt leaves at the first check, which reads only the rows as they were. It runs
after the row triggers (the fill among them), as the row trigger did, so it counts after the
claims a fused statement makes. Each of its statements takes a fresh snapshot: the counts,
made after the keys' locks, see every commit of an earlier holder of each key.
"""

from __future__ import annotations

from .idle import idle_notify
from .limits import ALLOWED, HELD_ROW_WAIT, KEY_LOCK_CLASS, RUNNING, key_hash

# The keys of the attempts the statement ended, sorted by their locks' second ints, as
# every statement takes them (claims.HELD_KEYS), into three parallel arrays.
ENDED_KEYS = f"""SELECT array_agg(e.type ORDER BY e.hash), array_agg(e.limit_key ORDER BY e.hash),
            array_agg(e.hash ORDER BY e.hash) INTO types, keys, hashes
        FROM (SELECT DISTINCT o.type, o.limit_key, {key_hash("o.type", "o.limit_key")} AS hash
              FROM ended_before o JOIN ended_after n ON n.id = o.id
              WHERE o.status = 'in_progress' AND o.limit_key IS NOT NULL
                AND n.status <> 'in_progress') AS e"""

# Each key's free slots, with a snapshot taken after its lock: as many as the limit in force
# allows beyond the attempts still live (a key of a type without a limit has room for all).
FREE = f"""SELECT array_agg(coalesce(({ALLOWED.format(row="u").replace(" INTO allowed", "")}),
            1000000) - {RUNNING.format(row="u")} ORDER BY u.place) INTO free
        FROM unnest(types, keys) WITH ORDINALITY AS u(type, limit_key, place)"""


def wake(room: str, skip: str) -> str:
    """The best blocked jobs of each key, as many as its `room` (an array parallel to the
    keys), unblocked; the types and keys of the jobs woken appended to woken_types and
    woken_keys. `skip` is "SKIP LOCKED" or nothing."""
    return f"""WITH unblocked AS (
                UPDATE jobq_jobs j SET blocked_on = NULL WHERE j.id IN (
                    SELECT b.id FROM unnest(types, keys, {room}) AS u(type, limit_key, room)
                    CROSS JOIN LATERAL (
                        SELECT b.id FROM jobq_jobs b WHERE b.type = u.type
                          AND b.limit_key = u.limit_key AND b.status = 'pending'
                          AND b.blocked_on IS NOT NULL
                        ORDER BY b.priority DESC, b.scheduled_at, b.id LIMIT greatest(u.room, 0)
                        FOR UPDATE {skip}) AS b
                    WHERE u.room > 0)
                RETURNING j.type, j.limit_key
            )
            SELECT coalesce(woken_types, '{{}}') || coalesce(array_agg(type), '{{}}'),
                coalesce(woken_keys, '{{}}') || coalesce(array_agg(limit_key), '{{}}')
            INTO woken_types, woken_keys FROM unblocked"""


# The room left in each key once the first pass woke what it could, counted only where the
# key still has blocked jobs: rows a concurrent claim holds, which the first pass skipped
# (see limits.WAKE_HELD, whose wait this is, done once for the statement).
LEFT = """SELECT array_agg(CASE WHEN EXISTS (SELECT FROM jobq_jobs b WHERE b.type = u.type
                    AND b.limit_key = u.limit_key AND b.status = 'pending'
                    AND b.blocked_on IS NOT NULL)
                THEN u.room - (SELECT count(*) FROM unnest(woken_types, woken_keys)
                               AS w(type, limit_key)
                               WHERE w.type = u.type AND w.limit_key = u.limit_key)
                ELSE 0 END ORDER BY u.place) INTO room_left
        FROM unnest(types, keys, free) WITH ORDINALITY AS u(type, limit_key, room, place)"""


def endings_function(create: str, ended_keys: str, left: str, counted: str = "") -> str:
    """The endings' trigger function: `ended_keys` fills types, keys and hashes, `left` the
    room_left array; `counted`, statements run once the keys' free slots are in `free`."""
    return f"""
    {create} FUNCTION jobq_limit_endings() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        types text[];
        keys text[];
        hashes integer[];
        free integer[];
        room_left integer[];
        woken_types text[];
        woken_keys text[];
        woken_type text;
        timeout text;
    BEGIN
        IF NOT EXISTS (SELECT FROM ended_before o WHERE o.status = 'in_progress'
                       AND o.limit_key IS NOT NULL) THEN
            RETURN NULL;
        END IF;
        {ended_keys};
        IF types IS NULL THEN
            RETURN NULL;
        END IF;
        PERFORM pg_advisory_xact_lock({KEY_LOCK_CLASS}, h) FROM unnest(hashes) AS h;
        {FREE};{counted}
        {wake("free", "SKIP LOCKED")};
        {left};
        IF EXISTS (SELECT FROM unnest(room_left) AS r WHERE r > 0) THEN
            BEGIN
                timeout := current_setting('lock_timeout');
                PERFORM set_config('lock_timeout', '{HELD_ROW_WAIT}', true);
                {wake("room_left", "")};
                PERFORM set_config('lock_timeout', timeout, true);
            EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
                NULL;
            END;
        END IF;
        FOR woken_type IN SELECT DISTINCT t FROM unnest(woken_types) AS t LOOP
            {idle_notify("woken_type")}
        END LOOP;
        RETURN NULL;
    END
    $$
"""


def endings_trigger(when: str = "") -> str:
    """The endings' statement trigger, fired only `when` that holds, if given."""
    condition = f"WHEN ({when}) " if when else ""
    return (
        "CREATE TRIGGER jobq_limit_endings AFTER UPDATE ON jobq_jobs "
        "REFERENCING OLD TABLE AS ended_before NEW TABLE AS ended_after "
        f"FOR EACH STATEMENT {condition}EXECUTE FUNCTION jobq_limit_endings()"
    )


# The row trigger gives way to the statement's; its function goes with it.
SET_ENDINGS: tuple[str, ...] = (
    "DROP TRIGGER jobq_limit_release ON jobq_jobs",
    "DROP FUNCTION jobq_limit_release()",
    endings_function("CREATE", ENDED_KEYS, LEFT),
    endings_trigger(),
)


# The keys whose live attempts the statement left fewer than it found: ENDED_KEYS without
# its join of the two transition tables, which PostgreSQL planned as a nested loop over
# both, every row before against every row after (4 ms of a statement that acknowledged and
# claimed 115 jobs), and without the keys whose next jobs the statement claimed: a statement
# that ends an attempt of a key and starts another (an acknowledgement fused with the next
# claim) leaves the key no more room than it found, and counting it again only found it
# full. (The batched acknowledgement, which claims its keys' next jobs itself, skips this
# trigger altogether: successors.py.) Summed by key, an attempt in progress before counts -1
# and one in progress after +1 (a renewal both), so a key is kept when it ended more
# attempts than it started. Room a key had before the statement (an attempt's lease ran out)
# is not this statement's to fill: the recovery of that attempt is an ending of its own. The
# type and key of a row never change once it is written.
ENDED_KEYS_NET = f"""SELECT array_agg(e.type ORDER BY e.hash),
            array_agg(e.limit_key ORDER BY e.hash), array_agg(e.hash ORDER BY e.hash)
            INTO types, keys, hashes
        FROM (SELECT x.type, x.limit_key, {key_hash("x.type", "x.limit_key")} AS hash
              FROM (SELECT o.type, o.limit_key, -1 AS change FROM ended_before o
                    WHERE o.status = 'in_progress' AND o.limit_key IS NOT NULL
                    UNION ALL
                    SELECT n.type, n.limit_key, 1 FROM ended_after n
                    WHERE n.status = 'in_progress' AND n.limit_key IS NOT NULL) AS x
              GROUP BY x.type, x.limit_key HAVING sum(x.change) < 0) AS e"""

# A key that ended more attempts than it started may still be full (its limit was lowered
# below what runs): when no key has room, nothing is woken.
NOTHING_FREE = """
        IF NOT EXISTS (SELECT FROM unnest(free) AS f WHERE f > 0) THEN
            RETURN NULL;
        END IF;"""

# LEFT, looking for blocked rows only in the keys whose room the first pass did not fill,
# with the jobs woken counted once for all keys rather than once per key.
LEFT_UNFILLED = """SELECT array_agg(CASE WHEN u.room <= coalesce(w.n, 0) THEN 0
                WHEN EXISTS (SELECT FROM jobq_jobs b WHERE b.type = u.type
                    AND b.limit_key = u.limit_key AND b.status = 'pending'
                    AND b.blocked_on IS NOT NULL)
                THEN u.room - coalesce(w.n, 0)
                ELSE 0 END ORDER BY u.place) INTO room_left
        FROM unnest(types, keys, free) WITH ORDINALITY AS u(type, limit_key, room, place)
        LEFT JOIN (SELECT w.type, w.limit_key, count(*) AS n
                   FROM unnest(woken_types, woken_keys) AS w(type, limit_key)
                   GROUP BY w.type, w.limit_key) AS w
          ON w.type = u.type AND w.limit_key = u.limit_key"""

LEANER_ENDINGS: tuple[str, ...] = (
    endings_function("CREATE OR REPLACE", ENDED_KEYS_NET, LEFT_UNFILLED, NOTHING_FREE),
)
