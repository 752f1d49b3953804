"""MySQL and MariaDB's claims: the probes that lock the next ready rows, and batched claims,
up to N jobs locked by one SELECT and claimed by one UPDATE, each with its own token."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from ...records import Claims
from ..batching import Batching, in_picked_order
from ..rows import REFUSED, Refused, Runner
from ..shapes import earliest, type_params
from ..workflows import Workflows
from .cursors import FROM_CURSOR, ClaimCursors
from .limits import MysqlLimits
from .schema import NOW

READY = (
    f"status = 'pending' AND scheduled_at <= {NOW} "
    f"AND (deadline IS NULL OR deadline > {NOW}) AND attempts < max_attempts"
)


def later(seconds_param: str) -> str:
    """now + a duration parameter given in whole microseconds (see MysqlBackend.seconds)."""
    return f"DATE_ADD({NOW}, INTERVAL %({seconds_param})s MICROSECOND)"


def ago(seconds_param: str) -> str:
    """now - a duration parameter given in whole microseconds (see MysqlBackend.seconds)."""
    return f"DATE_SUB({NOW}, INTERVAL %({seconds_param})s MICROSECOND)"


def probe(index: int | None, limit: str = "1", from_cursor: bool = False) -> str:
    """The next ready row of job type `index` (a parameter), or of any type for None, with
    the columns of a claim, scheduled_at and its concurrency or rate key (a limit's trigger
    may refuse the claim of a job that has one), locked.

    FORCE INDEX: with a type in the WHERE clause InnoDB's estimates often favour the untyped
    index, and the claim then walks every ready row of the other types in schedule order.
    `from_cursor`: the walk starts at the connection's cursor (cursors.py).
    """
    index_name, which, paused = (
        ("jobq_jobs_ready", "", "p.type = jobq_jobs.type")
        if index is None
        else ("jobq_jobs_ready_by_type", f" AND type = %(type{index})s", f"type = %(type{index})s")
    )
    return f"""
        SELECT id, type, class_name, payload, attempts + 1, {later("lease")}, max_attempts,
            backoff, max_backoff, jitter, deadline, traceparent, tracestate, checkpoint,
            priority, scheduled_at, coalesce(limit_key, rate_key)
        FROM jobq_jobs FORCE INDEX ({index_name}) WHERE {READY} AND blocked_on IS NULL{which}{
        FROM_CURSOR if from_cursor else ""
    }
          AND NOT EXISTS (SELECT 1 FROM jobq_paused p WHERE {paused})
        ORDER BY priority DESC, scheduled_at, id LIMIT {limit} FOR UPDATE SKIP LOCKED
    """


@cache
def claim_select(type_count: int, from_cursor: bool = False) -> str:
    """The next ready job of `type_count` types (type0, type1, ...), or of any for 0."""
    probes = [probe(i, "1", from_cursor) for i in range(type_count)]
    return earliest(probes or [probe(None, "1", from_cursor)])


@cache
def claim_many_select(type_count: int, from_cursor: bool = False) -> str:
    """The next %(n)s ready jobs of `type_count` types, or of any for 0, locked."""
    probes = [probe(i, "%(n)s", from_cursor) for i in range(type_count)]
    return earliest(probes or [probe(None, "%(n)s", from_cursor)], "%(n)s")


def handing(column: str, count: int) -> str:
    """A CASE that gives the row idI the value of parameter `column`I, for I below count."""
    cases = " ".join(f"WHEN %(id{i})s THEN %({column}{i})s" for i in range(count))
    return f"CASE id {cases} END"


class MysqlBatching(Batching, MysqlLimits, Workflows):
    claim_cursors: ClaimCursors

    def claim_many(
        self,
        types: Sequence[str],
        tokens: Sequence[str],
        lease: float,
        expires_monotonic: float,
        runner: Runner,
    ) -> Claims | Refused:
        self.wake_blocked()
        with self.transaction():
            return self.claim_many_within(types, tokens, lease, expires_monotonic, runner)

    def claim_many_within(
        self,
        types: Sequence[str],
        tokens: Sequence[str],
        lease: float,
        expires_monotonic: float,
        runner: Runner,
    ) -> Claims | Refused:
        self.apply_endings()
        if not tokens:
            # Asked for none, no walk: one from the head would reset its clock (cursors.py).
            return Claims()
        params: dict[str, Any] = {
            "n": len(tokens),
            "lease": self.seconds(lease),
            **type_params(types),
        }
        rows = self.claim_cursors.walk(
            types,
            lambda from_cursor, at: self.fetchall(
                claim_many_select(len(types), from_cursor), params | at
            ),
        )
        if not rows:
            return Claims()
        # One UPDATE for the batch: each row its own token and the lease its SELECT read; the
        # first starts now, the others once the worker gets to them if they wait in its queue
        # (as PostgreSQL's FIRST_STARTED).
        handed: dict[str, Any] = {}
        for i, (row, token) in enumerate(zip(rows, tokens, strict=False)):
            handed |= {f"id{i}": row[0], f"token{i}": token, f"lease_until{i}": row[5]}
        ids = ", ".join(f"%(id{i})s" for i in range(len(rows)))
        starting = "%(id0)s" if runner.queued else ids
        self.execute(
            f"""
            UPDATE jobq_jobs SET status = 'in_progress', attempts = attempts + 1,
                token = {handing("token", len(rows))},
                lease_until = {handing("lease_until", len(rows))},
                host = %(host)s, pid = %(pid)s, worker = %(worker)s, updated_at = {NOW},
                started_at = CASE WHEN id IN ({starting}) THEN coalesce(started_at, {NOW})
                    ELSE started_at END,
                attempted_at = CASE WHEN id IN ({starting}) THEN {NOW} END
            WHERE id IN ({ids})
            """,
            handed | runner.params(),
        )
        limited = [row[0] for row in rows if row[-1] is not None]
        refused = set(limited) - self.claimed_ids(limited) if limited else set()
        if len(refused) == len(rows):
            return REFUSED
        claimed = self.claims_of(
            (
                (token, *row)
                for row, token in zip(rows, tokens, strict=False)
                if row[0] not in refused
            ),
            expires_monotonic,
        )
        return in_picked_order(claimed, tokens, len(refused))

    sql_held_by = (
        "SELECT id, token, type FROM jobq_jobs WHERE status = 'in_progress' AND worker = %(worker)s"
    )

    sql_release = f"""
        UPDATE jobq_jobs SET status = 'pending', attempts = attempts - 1, token = NULL,
            lease_until = NULL, updated_at = {NOW}
        WHERE id = %(id)s AND token = %(token)s AND status = 'in_progress'
          AND cancel_requested_at IS NULL
    """
