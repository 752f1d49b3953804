"""SQLite's claims: the probes for the next ready rows, and the UPDATE … RETURNING that
claims one job, or several each with its own token."""

from __future__ import annotations

from functools import cache

from ..shapes import CLAIM_COLUMNS, earliest
from .schema import NOW, READY

# What a claim sets besides the attempt: when the job's first and this attempt began.
STARTED = f"started_at = coalesce(started_at, {NOW}), attempted_at = {NOW}"
# A batch's first attempt starts as it is claimed; the others', when they wait in the worker's
# queue (Runner.queued), are recorded with their ends (see the PostgreSQL backend's
# FIRST_STARTED).
STARTS_NOW = "(handed.place = 1 OR NOT :queued)"
FIRST_STARTED = (
    f"started_at = CASE WHEN {STARTS_NOW} THEN coalesce(started_at, {NOW}) "
    f"ELSE started_at END, attempted_at = CASE WHEN {STARTS_NOW} THEN {NOW} END"
)

TYPED_READY = READY.replace("scheduled_at <=", "+scheduled_at <=", 1)


def probe(index: int | None, limit: str = "1") -> str:
    """The next ready row (or `limit` rows) of job type `index` (a parameter), or of any
    type for None.

    INDEXED BY: with no statistics (SQLite has none until ANALYZE) the planner may walk the
    untyped index for a typed probe, past every row of the other types. The typed probe's
    schedule test is a filter (unary plus), not a range: statistics that show one type and
    one priority (an ANALYZE after a burst of one type) made the planner skip over both
    columns to range over scheduled_at, and then sort every ready row of the type.
    """
    if index is None:
        return f"""
            SELECT id, priority, scheduled_at FROM jobq_jobs INDEXED BY jobq_jobs_ready
            WHERE {READY} AND blocked_on IS NULL
              AND NOT EXISTS (SELECT 1 FROM jobq_paused p WHERE p.type = jobq_jobs.type)
            ORDER BY priority DESC, scheduled_at, id LIMIT {limit}
        """
    return f"""
        SELECT id, priority, scheduled_at FROM jobq_jobs INDEXED BY jobq_jobs_ready_by_type
        WHERE {TYPED_READY} AND blocked_on IS NULL AND type = :type{index}
          AND NOT EXISTS (SELECT 1 FROM jobq_paused WHERE type = :type{index})
        ORDER BY priority DESC, scheduled_at, id LIMIT {limit}
    """


@cache
def claim_statement(type_count: int) -> str:
    """The claim of the next ready job of `type_count` types (:type0, :type1, ...), or of
    any type for 0."""
    probes = [probe(i) for i in range(type_count)] or [probe(None)]
    return f"""
        UPDATE jobq_jobs SET status = 'in_progress', attempts = attempts + 1,
            token = :token, lease_until = {NOW} + :lease, host = :host, pid = :pid,
            worker = :worker, updated_at = {NOW}, {STARTED}
        WHERE id = (SELECT id FROM ({earliest(probes)}))
        RETURNING {CLAIM_COLUMNS}
    """


@cache
def picked_count_statement(type_count: int) -> str:
    """How many rows claim_many_statement would pick now: the rows a limit refuses are
    dropped from its RETURNING (RAISE(IGNORE)), so the claim counts them beforehand."""
    probes = [probe(i, ":n") for i in range(type_count)] or [probe(None, ":n")]
    return f"SELECT count(*) FROM ({earliest(probes, ':n')})"


@cache
def claim_many_statement(type_count: int) -> str:
    """The claim of up to :n ready jobs, as claim_statement picks them, the i-th picked
    taking the i-th token of :tokens (a JSON array)."""
    probes = [probe(i, ":n") for i in range(type_count)] or [probe(None, ":n")]
    return f"""
        WITH picked AS (
            SELECT id, row_number() OVER (ORDER BY priority DESC, scheduled_at, id) AS place
            FROM ({earliest(probes, ":n")})
        ),
        handed AS (
            SELECT picked.id, picked.place, given.value AS token FROM picked
            JOIN json_each(:tokens) AS given ON given.key + 1 = picked.place
        )
        UPDATE jobq_jobs SET status = 'in_progress', attempts = attempts + 1,
            token = handed.token, lease_until = {NOW} + :lease, host = :host, pid = :pid,
            worker = :worker, updated_at = {NOW}, {FIRST_STARTED}
        FROM handed WHERE jobq_jobs.id = handed.id
        RETURNING token, {CLAIM_COLUMNS}
    """
