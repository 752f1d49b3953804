"""PostgreSQL's claims: the next job in one UPDATE, fused with the last one's acknowledgement;
batched claims, up to N jobs in one UPDATE, each with its own token; their
acknowledgement fused with the next batch; the release of claims that never started."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from psycopg.types.json import Jsonb

from ...records import Claims
from ..batching import Batching, in_picked_order
from ..leases import expiry
from ..rows import ACK_PRECISION, REFUSED, Acknowledgement, Refused, Runner
from ..shapes import CLAIM_COLUMNS, earliest, type_params
from .limits import KEY_LOCK_CLASS, key_hash
from .results import logged
from .schema import NEXT_READY, in_progress
from .successors import SETTLED, SETTLES, SUCCESSORS, UNPICKED

RETURNED = ", ".join(f"j.{column}" for column in CLAIM_COLUMNS.split(", "))

# jobq_next_ready with a row count: the same probe, planned with the same settings, that
# stops after `how_many` rows instead of one.
READY_MANY = NEXT_READY.replace(
    "jobq_next_ready(job_type text)", "jobq_ready_many(job_type text, how_many integer)"
).replace("LIMIT 1", "LIMIT how_many")
MIGRATION = (READY_MANY,)


COMPLETE = f"""
        UPDATE jobq_jobs SET status = 'completed', token = NULL, lease_until = NULL,
            updated_at = now(), finished_at = now(), result = %(result)s, checkpoint = NULL,
            {logged()}
        WHERE id = %(id)s AND token = %(token)s AND {in_progress()}
          AND cancel_requested_at IS NULL
"""


# The concurrency keys of the attempts a statement acknowledges, locked in one order (their
# ids, {ids}, a bigint[] expression) before its claim runs: the order of their locks'
# second ints (limits.key_lock), so that two keys whose hashes collide, one lock, are taken
# in the same place by every statement. The claim's admits take keys as
# they meet them (SKIP LOCKED), and the endings' triggers then wait for the acknowledged
# rows' keys: two such statements each holding a key the other's endings wait for was a
# deadlock, about 15 a 20,000-job drain, each costing deadlock_timeout and a rerun. Locked
# here first, in the order every statement uses, the endings' keys are this transaction's
# when the triggers ask (an admit of one of them finds it its own, as a try-lock takes
# again a lock its own transaction holds), so no trigger waits. GATE makes a part of the
# statement wait for them: a one-time filter, evaluated before that part reads a row. (The
# locking query is not inlined, since its function is volatile, and its sorted subquery is
# not flattened, being DISTINCT: the locks are taken in the subquery's order.)
HELD_KEYS = f"""
    held AS (
        SELECT pg_advisory_xact_lock({KEY_LOCK_CLASS}, k.hash) FROM (
            SELECT DISTINCT {key_hash("a.type", "a.limit_key")} AS hash FROM jobq_jobs a
            WHERE a.id = ANY({{ids}}) AND {in_progress("a.")} AND a.limit_key IS NOT NULL
            ORDER BY 1) AS k
    )
"""
GATE = "(SELECT count(*) FROM held) >= 0"


# A batch's first attempt starts as it is claimed; the others wait in a process worker's
# queue (Runner.queued), and
# their starts are recorded with their ends, by the acknowledgement (complete_many_and_claim)
# or the failure that follows: no statement a start. Till then the job reads as claimed,
# not running (JobRecord.claimed_unstarted). A worker that runs a batch's attempts at once
# (not %(queued)s: the concurrent worker) starts them all. {place}: the row's place in the
# batch, from 1.
FIRST_STARTED = """started_at = CASE WHEN {place} = 1 OR NOT %(queued)s
                THEN coalesce({started}, now()) ELSE {started} END,
            attempted_at = CASE WHEN {place} = 1 OR NOT %(queued)s THEN now() END"""


def probe(index: int | None) -> str:
    """The next ready row of job type `index` (a parameter), or of any type for None."""
    return (
        f"SELECT id, priority, scheduled_at FROM jobq_next_ready(%(type{index})s::text)"
        if (index is not None)
        else "SELECT id, priority, scheduled_at FROM jobq_next_ready(NULL)"
    )


@cache
def claim_statement(type_count: int, token_param: str = "token", gate: str = "") -> str:
    """The claim of the next ready job of `type_count` types (type0, type1, ...), or of any
    type for 0; `gate`, a condition it waits for (see HELD_KEYS)."""
    probes = [probe(i) for i in range(type_count)] or [probe(None)]
    return f"""
        UPDATE jobq_jobs SET status = 'in_progress', attempts = attempts + 1,
            token = %({token_param})s, lease_until = now() + make_interval(secs => %(lease)s),
            host = %(host)s, pid = %(pid)s, worker = %(worker)s, updated_at = now(),
            started_at = coalesce(started_at, now()), attempted_at = now()
        WHERE id = (SELECT id FROM ({earliest(probes)}) AS next){gate and f" AND {gate}"}
        RETURNING {CLAIM_COLUMNS}, status
    """


@cache
def complete_and_claim_statement(type_count: int) -> str:
    """The acknowledgement and the next claim as one statement: one round trip and one commit
    per job. It always returns one row: whether the acknowledgement applied, then the claimed
    row's columns (NULL when nothing was ready). The claim cannot pick the row being
    acknowledged: both parts read one snapshot, in which that row is still in progress."""
    return f"""
        WITH {HELD_KEYS.format(ids="ARRAY[%(id)s::bigint]")},
        done AS ({COMPLETE} AND {GATE} RETURNING id),
        claimed AS ({claim_statement(type_count, "new_token", GATE)})
        SELECT EXISTS (SELECT FROM done), claimed.*
        FROM (VALUES (1)) AS one LEFT JOIN claimed ON true
    """


def probe_many(index: int | None) -> str:
    """The next `n` ready rows of job type `index` (a parameter), or of any type for None."""
    which = "NULL" if index is None else f"%(type{index})s::text"
    return f"SELECT id, priority, scheduled_at FROM jobq_ready_many({which}, %(n)s::integer)"


@cache
def claim_parts(type_count: int, gate: str = "TRUE", done: str = "") -> tuple[str, str]:
    """The common table expressions that pick up to n rows and hand each its token (the
    i-th of %(tokens)s to the i-th row picked), once `gate` holds (see HELD_KEYS), and the
    UPDATE that claims them. With `done`, the CTE of the statement's completions, the
    picks include the next jobs of their keys (successors.py), and those not picked are
    woken (the CTE `woken`, which the statement must read)."""
    probes = [probe_many(i) for i in range(type_count)] or [probe_many(None)]
    ready, order = earliest(probes, "%(n)s"), "priority DESC, scheduled_at, id"
    successors = unpicked = ""
    if done:
        order = "priority DESC, later, scheduled_at, id"
        ready = f"""SELECT id, priority, scheduled_at, 1 AS later FROM ({ready}) AS probed
            UNION ALL SELECT id, priority, scheduled_at, later FROM successors WHERE NOT paused
            ORDER BY {order} LIMIT %(n)s"""
        successors = SUCCESSORS.format(done=done) + ","
        unpicked = "," + UNPICKED
    picked = f"""
        {successors}
        picked AS (
            SELECT id, row_number() OVER (ORDER BY {order}) AS place
            FROM ({ready}) AS ready
            WHERE {gate}
            LIMIT %(n)s
        ),
        handed AS (
            SELECT picked.id, place, given.token FROM picked
            JOIN unnest(%(tokens)s::text[]) WITH ORDINALITY AS given(token, place) USING (place)
        ){unpicked}
    """
    update = f"""
        UPDATE jobq_jobs AS j SET status = 'in_progress', attempts = j.attempts + 1,
            token = handed.token, lease_until = now() + make_interval(secs => %(lease)s),
            host = %(host)s, pid = %(pid)s, worker = %(worker)s, updated_at = now(),
            {FIRST_STARTED.format(place="handed.place", started="j.started_at")},
            blocked_on = NULL
        FROM handed WHERE j.id = handed.id
          -- Implied by the join, and there so that the planner looks the rows up by primary
          -- key: it hashed the whole table for a batch of a hundred, 27 ms at 20,000 rows.
          AND j.id = ANY(ARRAY(SELECT id FROM handed))
        RETURNING j.token, {RETURNED}, j.status
    """
    return picked, update


@cache
def claim_many_statement(type_count: int) -> str:
    picked, update = claim_parts(type_count)
    return f"WITH {picked} {update}"


def acked_ago(index: int) -> str:
    """The moment a number of microseconds ago, the `index`-th element of the row's entry in
    %(acked)s, or now() for a batch sent without times (see acknowledged())."""
    entry = f"(%(acked)s -> d.id::text ->> {index})::bigint"
    return f"CASE WHEN %(timed)s THEN now() - {entry} * interval '1 microsecond' ELSE now() END"


# When a batch's completed attempt began (unless its claim recorded its start: the first of
# its batch did) and ended, by the worker's account.
ACK_BEGAN, ACK_ENDED = acked_ago(2), acked_ago(3)


@cache
def complete_many_and_claim_statement(type_count: int) -> str:
    """Every acknowledgement and the next batch in one statement. Each row returned carries
    one claimed row's columns (NULL when nothing was ready) after a first column, which on
    one row is the ids completed (NULL if none) and on every other row NULL. As in
    complete_and_claim_statement, one snapshot: no row acknowledged can be claimed again."""
    picked, update = claim_parts(type_count, GATE, "done")
    return f"""
        WITH {HELD_KEYS.format(ids="%(ids)s::bigint[]")}, {SETTLED},
        done AS (
            UPDATE jobq_jobs AS d SET status = 'completed', token = NULL, lease_until = NULL,
                updated_at = now(), finished_at = {ACK_ENDED},
                result = %(acked)s -> d.id::text ->> 1, checkpoint = NULL,
                started_at = coalesce(d.started_at, {ACK_BEGAN}),
                attempted_at = coalesce(d.attempted_at, {ACK_BEGAN}),
                {logged(began=f"coalesce(d.attempted_at, {ACK_BEGAN})", ended=ACK_ENDED)}
            WHERE d.id = ANY(%(ids)s::bigint[]) AND d.token = %(acked)s -> d.id::text ->> 0
              AND {in_progress("d.")} AND d.cancel_requested_at IS NULL AND {GATE} AND {SETTLES}
            RETURNING d.id, d.type, d.limit_key
        ),
        {picked},
        claimed AS ({update})
        -- The ids completed once, not on every claimed row: with them on each, n acknowledged
        -- with n claimed were n squared ids to write out, send and parse.
        SELECT CASE WHEN row_number() OVER () = 1 THEN (SELECT array_agg(id) FROM done) END,
            claimed.*
        FROM (VALUES (1)) AS one LEFT JOIN claimed ON true
        CROSS JOIN (SELECT count(*) FROM woken) AS settling
    """


def acknowledged(done: Iterable[Acknowledgement]) -> dict[str, Any]:
    """The parameters of a batched acknowledgement's attempts: their ids, and each one's
    token, result, and microseconds since it began and ended (unless the whole batch ran
    within ACK_PRECISION) in a JSON object keyed by id, where each row the statement completes
    finds its own. Three parallel arrays needed a join of their rows with the jobs', whose
    method followed the estimated number of acknowledgements: a generic plan, reckoning ten,
    walked all of them for each row completed (8 of 10 ms for 150 acknowledgements,
    measured). Whole microseconds, not seconds: JSON writes a float at four times an
    integer's cost, about 1.4 us a job more (measured)."""
    attempts = list(done)
    timed = max((began for *_, began, _ in attempts), default=0.0) >= ACK_PRECISION
    acked = (
        {
            str(job_id): [token, result, int(began * 1e6), int(ended * 1e6)]
            for job_id, token, result, began, ended in attempts
        }
        if timed
        else {str(job_id): [token, result] for job_id, token, result, *_ in attempts}
    )
    return {
        "ids": numbers(job_id for job_id, *_ in attempts),
        "acked": Jsonb(acked),
        "timed": timed,
    }


def numbers(values: Iterable[int]) -> str:
    """An array literal of integers, for a `::bigint[]` parameter (see texts())."""
    return "{" + ",".join(map(str, values)) + "}"


def texts(values: Iterable[str | None]) -> str:
    """An array literal of texts, each quoted (NULL for None), for a `::text[]` parameter.

    A claim's and an acknowledgement's arrays travel as one text each, cast in SQL: psycopg
    dumps a Python list by looking at every element's type on each statement, which was
    about 12% of a short job's client CPU. (Measured on 2 loaded cores, an acknowledgement
    of 10 with its claim: 90 to 120 us of client CPU with lists, 50 to 70 with literals;
    the server's parse costs the same either way.)"""
    return (
        "{"
        + ",".join(
            "NULL" if v is None else '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
            for v in values
        )
        + "}"
    )


class PostgresBatching(Batching):
    connection: Any  # the backend's psycopg connection (Backend.__init__)

    def claim_many(
        self,
        types: Sequence[str],
        tokens: Sequence[str],
        lease: float,
        expires_monotonic: float,
        runner: Runner,
    ) -> Claims | Refused:
        params = self.batch_params(types, tokens, lease, runner)
        rows = self.batch_rows(claim_many_statement(len(types)), params)
        claimed = self.batch_claimed(rows, tokens, expires_monotonic)
        return REFUSED if rows and not claimed else claimed

    def complete_many_and_claim(
        self,
        done: Sequence[Acknowledgement],
        types: Sequence[str],
        tokens: Sequence[str],
        lease: float,
        runner: Runner,
    ) -> tuple[set[int], Claims]:
        params = self.batch_params(types, tokens, lease, runner) | acknowledged(done)
        expires = expiry(lease)
        rows = self.batch_rows(complete_many_and_claim_statement(len(types)), params)
        completed = {int(job_id) for row in rows if row[0] is not None for job_id in row[0]}
        # The claimed rows and the refused ones, whose token the trigger left NULL; the lone
        # row of a claim that picked nothing has no id.
        claims = [row[1:] for row in rows if row[2] is not None]
        return completed, self.batch_claimed(claims, tokens, expires)

    def batch_rows(self, sql: str, params: dict[str, Any]) -> list[Any]:
        """Prepared once psycopg has run it a few times (unless behind a pooler), after which
        the server keeps a generic plan, one that guesses ten elements per array and knows
        none of the statement's sizes. Every part of both batched statements finds its rows
        by primary key or through the probes' functions whatever the sizes, and their
        acknowledgements need no join (acknowledged()), so that plan is the one a batch
        would get planned for itself (pinned by plan tests): planning each run cost the
        server about a millisecond a statement, parse included, which a drain of limited
        keys, at a batch of a worker's keys, paid about every hundred jobs."""
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall())

    def batch_params(
        self, types: Sequence[str], tokens: Sequence[str], lease: float, runner: Runner
    ) -> dict[str, Any]:
        return {
            "n": len(tokens),
            "tokens": texts(tokens),
            "lease": lease,
            **runner.params(),
            **type_params(types),
        }

    def batch_claimed(
        self, rows: Sequence[Sequence[Any]], tokens: Sequence[str], expires_monotonic: float
    ) -> Claims:
        """Rows of (token, claim columns..., status) as claims, in the order they were
        picked; a row a limit refused (see limits.py) is still pending, and counted."""
        held = [row for row in rows if row[-1] == "in_progress"]
        refused = len(rows) - len(held)
        return in_picked_order(self.claims_of(held, expires_monotonic), tokens, refused)

    sql_held_by = (
        "SELECT id, token, type FROM jobq_jobs WHERE status = 'in_progress' AND worker = %(worker)s"
    )

    # Each release's trigger waits for its key: in the fused statements' order, not the
    # claims' (see HELD_KEYS).
    sql_hold_keys_of = f"WITH {HELD_KEYS.format(ids='%(ids)s::bigint[]')} SELECT count(*) FROM held"

    # Ready at once, so it wakes idle workers as an enqueue does (one per type: PostgreSQL
    # sends a repeated notification of a transaction once).
    sql_release = f"""
        WITH released AS (
            UPDATE jobq_jobs SET status = 'pending', attempts = attempts - 1, token = NULL,
                lease_until = NULL, updated_at = now()
            WHERE id = %(id)s AND token = %(token)s AND {in_progress()}
              AND cancel_requested_at IS NULL
            RETURNING type
        )
        SELECT pg_notify(%(channel)s, type) FROM released
    """
