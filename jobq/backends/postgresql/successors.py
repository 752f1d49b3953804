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
"""

from __future__ import annotations

import re

from ...limits import CONCURRENCY, MAX_COUNT
from .limits import key_lock
from .schema import READY, SETTINGS

BLOCKED_READY = re.sub(r"\b(status|scheduled_at|deadline|attempts|max_attempts)\b", r"b.\1", READY)

# The best blocked jobs of each key held (held_types, held_keys), as many as its free slots.
KEY_SUCCESSORS_QUERY = f"""
        SELECT s.id, s.priority, s.scheduled_at
        FROM unnest(held_types, held_keys) AS k(type, limit_key)
        CROSS JOIN LATERAL (
            SELECT b.id, b.priority, b.scheduled_at FROM jobq_jobs b
            WHERE b.type = k.type AND b.limit_key = k.limit_key AND {BLOCKED_READY}
              AND b.blocked_on IS NOT NULL
              AND NOT EXISTS (SELECT FROM jobq_paused p WHERE p.type = b.type)
            ORDER BY b.priority DESC, b.scheduled_at, b.id
            LIMIT greatest(coalesce(
                (SELECT coalesce(l.override, l.declared) FROM jobq_limits l
                 WHERE l.type = k.type AND l.name = '{CONCURRENCY}'), {MAX_COUNT})
                - (SELECT count(*) FROM jobq_jobs r WHERE r.type = k.type
                   AND r.limit_key = k.limit_key AND r.status = 'in_progress'
                   AND r.lease_until > now()), 0)
            FOR UPDATE SKIP LOCKED) AS s
"""

# The keys are the statement's, their locks this transaction's: taking one again costs a
# lookup. A key another transaction holds (none should be) is passed over, its jobs left to
# the endings' wake-up. The count comes after the locks, in a statement of its own, so that
# its snapshot sees every commit of an earlier holder. A key of a type with no limit any
# more has room for all. Planned without sorts, as the ready probes are (schema.SETTINGS):
# its row count an expression, the planner otherwise read a key's whole blocked backlog and
# sorted it.
KEY_SUCCESSORS = f"""
    CREATE FUNCTION jobq_key_successors(types text[], keys text[])
    RETURNS TABLE (id bigint, priority smallint, scheduled_at timestamptz)
    LANGUAGE plpgsql VOLATILE {SETTINGS} SET jit = off AS $$
    DECLARE
        held_types text[];
        held_keys text[];
    BEGIN
        SELECT array_agg(k.type), array_agg(k.limit_key) INTO held_types, held_keys
        FROM unnest(types, keys) AS k(type, limit_key)
        WHERE {key_lock("k.type", "k.limit_key", "pg_try_advisory_xact_lock")};
        RETURN QUERY {KEY_SUCCESSORS_QUERY};
    END
    $$
"""

# The admit and the fill run for claims of ready jobs only.
SUCCESSOR_CLAIMS: tuple[str, ...] = (
    KEY_SUCCESSORS,
    "DROP TRIGGER jobq_limit_admit ON jobq_jobs",
    "CREATE TRIGGER jobq_limit_admit BEFORE UPDATE OF status ON jobq_jobs FOR EACH ROW "
    "WHEN (OLD.status = 'pending' AND OLD.blocked_on IS NULL AND NEW.status = 'in_progress' "
    "AND NEW.limit_key IS NOT NULL) EXECUTE FUNCTION jobq_limit_admit()",
    "DROP TRIGGER jobq_limit_fill ON jobq_jobs",
    "CREATE TRIGGER jobq_limit_fill AFTER UPDATE OF status ON jobq_jobs FOR EACH ROW "
    "WHEN (OLD.status = 'pending' AND OLD.blocked_on IS NULL AND NEW.limit_key IS NOT NULL "
    "AND (NEW.status = 'in_progress' OR NEW.blocked_on IS NOT NULL)) "
    "EXECUTE FUNCTION jobq_limit_fill()",
)

# The CTE of a batched acknowledgement's picks among those jobs, {done} the CTE of its
# completions (returning their type and limit_key). Its keys are aggregated from {done}, so
# every completion is made before the function counts. `later` orders them first among the
# jobs of their priority: a worker goes on with the keys it holds, and the ready jobs of
# other keys are left to the other claims, where they would be had the endings woken these.
SUCCESSORS = """
    successors AS (
        SELECT s.id, s.priority, s.scheduled_at, 0 AS later
        FROM (SELECT array_agg(type) AS types, array_agg(limit_key) AS keys
              FROM (SELECT DISTINCT type, limit_key FROM {done}
                    WHERE limit_key IS NOT NULL) AS ended) AS k
        CROSS JOIN LATERAL jobq_key_successors(k.types, k.keys) AS s
        WHERE k.types IS NOT NULL
    )
"""
