"""PostgreSQL's claim of the next jobs of the concurrency keys that a batched acknowledgement
frees, in the same statement, admitted for all those keys at once.

In a drain of limited keys, each ending woke its key's next job (a write), and a later claim
wrote it again, through the admit trigger's four statements for its one row. The batched
acknowledgement (claims.complete_many_and_claim_statement) already holds the locks of the
keys it completes (claims.HELD_KEYS). Once its completions are made, jobq_key_successors
counts each of those keys with a fresh snapshot (a PL/pgSQL query takes one, and sees the
completions the statement made) and picks as many of its blocked jobs as it has free slots,
best first; the statement claims them with its other picks. Holding the key, that count is
the admit trigger's own, so the trigger leaves claims of blocked jobs to it: no other path
of jobq claims a blocked job. Nor does their fill run: a blocked job's key has its other
jobs blocked already (at their enqueue, or by the claim that filled it), and one enqueued
since is blocked by the admit of the claim that meets it.

Nor does the endings' trigger run for that statement (limit_endings.py): it would find the
keys the statement just counted, and its calls, counts and checks took about 100 ms of a
limited drain's 1.5 s of server CPU (perf, 20,000 jobs) to wake nothing but the chains'
ends. The statement
settles its endings itself instead. Its successors are every blocked job a freed slot
allows, a paused type's included; those it does not claim (a paused type's, or beyond the
batch it asked for) it wakes, as the trigger would have, idle workers notified. A key with
no blocked job left has nothing to wake. A blocked row that another transaction holds
locked (an operator's cancel, maintenance) is skipped, as the trigger's first pass skips it;
should that transaction leave the row blocked, maintenance's sweep of stranded keys wakes it.
"""

from __future__ import annotations

import re

from ...limits import CONCURRENCY, MAX_COUNT
from .idle import idle_notify
from .limit_endings import endings_trigger
from .schema import READY, SETTINGS

BLOCKED_READY = re.sub(r"\b(status|scheduled_at|deadline|attempts|max_attempts)\b", r"b.\1", READY)

# A key's attempts holding a slot (limits.RUNNING), as this query counts them.
KEY_RUNNING = """(SELECT count(*) FROM jobq_jobs r WHERE r.type = k.type
                   AND r.limit_key = k.limit_key AND r.status = 'in_progress'
                   AND r.lease_until > now())"""

# The best blocked jobs of each key (types, keys), as many as its free slots, each with
# whether its type is paused. A key of a type with no limit any more has room for all. The
# limits and the pauses are read once a type, not once a key: a third of the buffers it read
# for 100 keys went to those two lookups (measured).
KEY_SUCCESSORS_QUERY = f"""
        WITH kinds AS MATERIALIZED (
            SELECT t.type, coalesce((SELECT coalesce(l.override, l.declared) FROM jobq_limits l
                                     WHERE l.type = t.type AND l.name = '{CONCURRENCY}'),
                                    {MAX_COUNT}) AS count,
                EXISTS (SELECT FROM jobq_paused p WHERE p.type = t.type) AS paused
            FROM (SELECT DISTINCT unnest(types) AS type) AS t)
        SELECT s.id, s.priority, s.scheduled_at, a.paused
        FROM unnest(types, keys) AS k(type, limit_key)
        JOIN kinds a ON a.type = k.type
        CROSS JOIN LATERAL (
            SELECT b.id, b.priority, b.scheduled_at FROM jobq_jobs b
            WHERE b.type = k.type AND b.limit_key = k.limit_key AND {BLOCKED_READY}
              AND b.blocked_on IS NOT NULL
            ORDER BY b.priority DESC, b.scheduled_at, b.id
            LIMIT greatest(a.count
                - {KEY_RUNNING}, 0)
            FOR UPDATE SKIP LOCKED) AS s
"""

# Its caller holds every key's lock (claims.HELD_KEYS, taken before the completions whose
# keys these are). The count is a statement of the function's own, so that its snapshot,
# taken after those locks, sees every commit of an earlier holder. Planned without sorts, as
# the ready probes are (schema.SETTINGS): its row count an expression, the planner otherwise
# read a key's whole blocked backlog and sorted it.
KEY_SUCCESSORS = f"""
    CREATE FUNCTION jobq_key_successors(types text[], keys text[])
    RETURNS TABLE (id bigint, priority smallint, scheduled_at timestamptz, paused boolean)
    LANGUAGE plpgsql VOLATILE {SETTINGS} SET jit = off AS $$
    BEGIN
        RETURN QUERY {KEY_SUCCESSORS_QUERY};
    END
    $$
"""

# The successors a statement does not claim, woken (see the module's docstring): ready for
# any claim, the idle workers told. A woken job the statement's claims filled the key again
# for meets the admit of its claim, which blocks it again.
WAKE_BLOCKED = f"""
    CREATE FUNCTION jobq_wake_blocked(ids bigint[]) RETURNS integer
    LANGUAGE plpgsql VOLATILE AS $$
    DECLARE
        woken_types text[];
        woken_type text;
    BEGIN
        WITH woken AS (
            UPDATE jobq_jobs SET blocked_on = NULL
            WHERE id = ANY(ids) AND status = 'pending' AND blocked_on IS NOT NULL
            RETURNING type
        )
        SELECT array_agg(DISTINCT type) INTO woken_types FROM woken;
        FOREACH woken_type IN ARRAY coalesce(woken_types, '{{}}') LOOP
            {idle_notify("woken_type")}
        END LOOP;
        RETURN coalesce(cardinality(woken_types), 0);
    END
    $$
"""

# The name of the setting by which a statement tells the endings' trigger that it settled
# its endings itself: set to the statement's start, it holds for that statement only.
SETTLED_SETTING = "jobq.endings_settled"
SETTLED_BY_STATEMENT = f"current_setting('{SETTLED_SETTING}', true) = statement_timestamp()::text"

# The admit and the fill run for claims of ready jobs only; the endings, for statements
# other than a batched acknowledgement with its keys' successors.
SUCCESSOR_CLAIMS: tuple[str, ...] = (
    KEY_SUCCESSORS,
    WAKE_BLOCKED,
    "DROP TRIGGER jobq_limit_admit ON jobq_jobs",
    "CREATE TRIGGER jobq_limit_admit BEFORE UPDATE OF status ON jobq_jobs FOR EACH ROW "
    "WHEN (OLD.status = 'pending' AND OLD.blocked_on IS NULL AND NEW.status = 'in_progress' "
    "AND NEW.limit_key IS NOT NULL) EXECUTE FUNCTION jobq_limit_admit()",
    "DROP TRIGGER jobq_limit_fill ON jobq_jobs",
    "CREATE TRIGGER jobq_limit_fill AFTER UPDATE OF status ON jobq_jobs FOR EACH ROW "
    "WHEN (OLD.status = 'pending' AND OLD.blocked_on IS NULL AND NEW.limit_key IS NOT NULL "
    "AND (NEW.status = 'in_progress' OR NEW.blocked_on IS NOT NULL)) "
    "EXECUTE FUNCTION jobq_limit_fill()",
    "DROP TRIGGER jobq_limit_endings ON jobq_jobs",
    endings_trigger(f"NOT coalesce({SETTLED_BY_STATEMENT}, false)"),
)

# The CTE that marks the statement as settling its own endings; SETTLES, the condition that
# waits for it (as claims.GATE waits for the keys' locks).
SETTLED = f"settled AS (SELECT set_config('{SETTLED_SETTING}', statement_timestamp()::text, true))"
SETTLES = "(SELECT count(*) FROM settled) = 1"

# The CTE of a batched acknowledgement's picks among those jobs, {done} the CTE of its
# completions (returning their type and limit_key). Its keys are aggregated from {done}, so
# every completion is made before the function counts. `later` orders them first among the
# jobs of their priority: a worker goes on with the keys it holds, and the ready jobs of
# other keys are left to the other claims, where they would be had the endings woken these.
SUCCESSORS = """
    successors AS (
        SELECT s.id, s.priority, s.scheduled_at, 0 AS later, s.paused
        FROM (SELECT array_agg(type) AS types, array_agg(limit_key) AS keys
              FROM (SELECT DISTINCT type, limit_key FROM {done}
                    WHERE limit_key IS NOT NULL) AS ended) AS k
        CROSS JOIN LATERAL jobq_key_successors(k.types, k.keys) AS s
        WHERE k.types IS NOT NULL
    )
"""

# The successors the statement's picks left, woken; its main query reads it, so that it runs.
UNPICKED = """
    woken AS (
        SELECT jobq_wake_blocked(array_agg(s.id)) AS woken_types FROM successors s
        WHERE NOT EXISTS (SELECT FROM picked p WHERE p.id = s.id)
        HAVING count(*) > 0
    )
"""
