"""PostgreSQL through psycopg 3: claims are one UPDATE over a row picked FOR UPDATE SKIP LOCKED."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pgerrors
from psycopg.pq import TransactionStatus

from ...records import ClaimedJob
from ..base import Backend, bring_forward, work_left
from ..leases import expiry
from ..limits import REFUSALS
from ..naming import application_name
from ..pruning import OLDEST_FINISHED_AT
from ..pruning import PARTIAL_INDEX as PRUNING
from ..rows import INSERT_NAMES, REFUSED, NewJob, Refused, Renewal, Runner, claimed_only
from ..shapes import type_params
from ..steps import CopyRows, Step, Steps, fetched, one
from ..workflows import kept
from .blocked_cursors import BLOCKED_CURSORS
from .claims import COMPLETE, PostgresBatching, claim_statement, complete_and_claim_statement
from .claims import MIGRATION as BATCHES
from .controls import MIGRATION as STATUS_PAGE
from .controls import NOTIFY_CHANNEL, RETRY, PostgresControls
from .cursors import CLAIM_CURSORS
from .dsn import libpq_dsn
from .events import EVENTS, PostgresEvents
from .idle import IDLE_WAKES, PostgresIdle
from .insert import copy_steps, insert_statement, outside_transaction
from .key_locks import KEY_LOCKS
from .limit_endings import LEANER_ENDINGS, SET_ENDINGS
from .limit_floors import LIMIT_FLOORS
from .limits import LIMIT_WAKES, LIMITS, PostgresLimits
from .nodes import MIGRATION as NODE_TABLE
from .nodes import NODES
from .pooler import behind_pooler, pool_mode, prepared_statement_lost, unprepared
from .rates import RATES
from .replication import failover_risk
from .results import RESULTS, PostgresReporting, logged
from .schema import MIGRATIONS, NO_JIT, READY, TRACE_CONTEXT, WORKER_IDS, in_progress
from .search import PostgresSearch
from .step_records import STEPS, PostgresStepRecords
from .successors import SUCCESSOR_CLAIMS
from .uniqueness import DECLARED_AT, PostgresUniqueness
from .uniqueness import MIGRATION as UNIQUENESS
from .workflows import FLAGGED_PARENTS, LONE_ENDINGS, WORKFLOWS, PostgresWorkflows

log = logging.getLogger("jobq")

# One attempt's lease, extended.
RENEW = f"""
    UPDATE jobq_jobs
    SET lease_until = greatest(lease_until, now() + make_interval(secs => %(lease)s))
    WHERE id = %(id)s AND token = %(token)s AND {in_progress()} AND lease_until > now()
    RETURNING lease_until
"""

# Every lease a master's workers hold, extended in one statement, each guarded by its token.
RENEW_MANY = """
    UPDATE jobq_jobs AS j
    SET lease_until = greatest(j.lease_until, now() + make_interval(secs => %(lease)s)),
        started_at = coalesce(j.started_at, now() - make_interval(secs => c.age)),
        attempted_at = coalesce(j.attempted_at, now() - make_interval(secs => c.age))
    FROM unnest(%(ids)s::bigint[], %(tokens)s::text[], %(ages)s::float8[]) AS c(id, token, age)
    WHERE j.id = c.id AND j.token = c.token AND j.status = 'in_progress'
      AND j.lease_until > now()
      -- Implied by the join, and there so that the rows are read by primary key: with
      -- statistics taken before the claims, the planner read every attempt in progress
      -- (every supervisor's) to renew one master's few.
      AND j.id = ANY(%(ids)s::bigint[])
    RETURNING j.id, j.cancel_requested_at IS NOT NULL
"""

T = TypeVar("T")

# Taken by every install and migration script of a database: concurrent ones queue up.
INSTALL_LOCK = "SELECT pg_advisory_xact_lock(4242001)"


# When an attempt that ends began, %(began)s seconds ago by its worker's account: for one
# that waited in its worker's queue, whose claim left its start unrecorded (claims.py).
BEGAN = "now() - make_interval(secs => %(began)s::float8)"


class PostgresBackend(
    PostgresEvents,
    PostgresStepRecords,
    PostgresUniqueness,
    PostgresControls,
    PostgresSearch,
    PostgresBatching,
    PostgresReporting,
    PostgresLimits,
    PostgresWorkflows,
    PostgresIdle,
    Backend,
):
    kind = "postgresql"
    # The last: the schedules' declarations, and the retry that never fails on a key.
    node_sql = NODES
    migrations = (
        *MIGRATIONS,
        UNIQUENESS,
        BATCHES,
        STATUS_PAGE,
        NO_JIT,
        WORKER_IDS,
        (*DECLARED_AT, RETRY),
        TRACE_CONTEXT,
        RESULTS,
        LIMITS,
        WORKFLOWS,
        RATES,
        LIMIT_WAKES,
        LONE_ENDINGS,
        IDLE_WAKES,
        FLAGGED_PARENTS,
        KEY_LOCKS,
        SET_ENDINGS,
        (*LEANER_ENDINGS, *SUCCESSOR_CLAIMS),
        CLAIM_CURSORS,
        PRUNING,
        (*STEPS, *EVENTS),
        (*LIMIT_FLOORS, *BLOCKED_CURSORS),
        NODE_TABLE,
    )

    def __init__(
        self,
        connection: psycopg.Connection[Any],
        *,
        owns_connection: bool,
        pooled: bool = False,
        listen_dsn: str | None = None,
    ) -> None:
        super().__init__(connection, owns_connection=owns_connection)
        self.cursor: psycopg.Cursor[Any] | None = None
        # Behind a transaction pooler: no LISTEN on this connection (see listen()).
        self.pooled = pooled
        self.listen_dsn = listen_dsn
        self.listening: psycopg.Connection[Any] | None = None

    def own_cursor(self) -> psycopg.Cursor[Any]:
        # One cursor for the connection's life: making one per statement (with its own
        # adapter map) was a measurable share of a worker's CPU per job.
        if self.cursor is None or self.cursor.closed:
            self.cursor = self.connection.cursor()
        return self.cursor

    def fetchone(self, sql: str, params: Any = None) -> Any:
        cursor = self.own_cursor()
        cursor.execute(sql, params)
        return cursor.fetchone()

    def perform(self, step: Step, connection: Any) -> Any:
        if isinstance(step, CopyRows):
            with connection.cursor() as cursor, cursor.copy(step.statement) as copy:
                copy.set_types(step.types)
                for row in step.rows:
                    copy.write_row(row)
            return None
        if connection is not self.connection:
            return super().perform(step, connection)
        cursor = self.own_cursor()
        cursor.execute(step.sql, step.params)
        return fetched(cursor, step.fetch)

    def run_together(self, steps: Steps[T], connection: Any) -> T:
        if not outside_transaction(connection):
            return self.run(steps, connection)
        with connection.transaction():
            return self.run(steps, connection)

    @classmethod
    def connect(
        cls, dsn: str, listen_dsn: str | None = None, create: bool = True
    ) -> PostgresBackend:
        """(`create` does not apply: connecting never creates a server's database.)"""
        dsn, pooled = pool_mode(dsn)
        # A transaction pooler hands each transaction to any server connection, where a
        # statement prepared on another does not exist, or another statement has its name.
        prepare = {"prepare_threshold": None} if pooled else {}
        connection = psycopg.connect(
            libpq_dsn(dsn), autocommit=True, **prepare, **application_name(dsn)
        )
        try:
            if not pooled and behind_pooler(connection):
                # Maybe a transaction pooler the DSN does not name: the one statement run so
                # far was not prepared (psycopg prepares on a statement's fifth run).
                unprepared(connection, "This connection goes through a connection pooler")
        except BaseException:
            connection.close()
            raise
        return cls(connection, owns_connection=True, pooled=pooled, listen_dsn=listen_dsn)

    def close(self) -> None:
        if self.listening is not None:
            self.listening.close()
        super().close()

    def transaction_problem(self) -> str | None:
        if self.connection.closed:
            return "the PostgreSQL connection is closed"
        if not self.connection.autocommit:
            return "the PostgreSQL connection is not in autocommit mode"
        # From libpq directly: connection.info builds an object per call, and this is
        # asked before every consumer statement.
        if self.connection.pgconn.transaction_status != TransactionStatus.IDLE:
            return "the PostgreSQL connection has an open transaction"
        return None

    def is_transient(self, error: BaseException) -> bool:
        return isinstance(
            error,
            pgerrors.DeadlockDetected | pgerrors.LockNotAvailable | pgerrors.SerializationFailure,
        )

    def failover_risk(self) -> str | None:
        return failover_risk(self.connection)

    def recovered(self, error: BaseException) -> bool:
        # The statement failed at its Bind or Parse, so it did nothing: rerun unprepared, and
        # the acknowledgement lands.
        if not prepared_statement_lost(error) or self.connection.prepare_threshold is None:
            return False
        unprepared(self.connection, f"A prepared statement went missing ({error})")
        return True

    def to_datetime(self, value: Any) -> datetime:
        assert isinstance(value, datetime)
        return value.astimezone(UTC)

    @contextmanager
    def install_lock(self) -> Iterator[None]:
        # An arbitrary constant shared by every jobq install: concurrent installs queue up.
        # The whole install is one transaction holding a transaction-level lock: behind a
        # transaction pooler a session-level lock and its unlock may reach different server
        # connections, and the lock would stay held on one of them for good.
        with self.connection.transaction():
            self.execute(INSTALL_LOCK)
            yield

    script_begin = ("BEGIN", INSTALL_LOCK)
    script_end = ("COMMIT",)

    sql_create_versions = "CREATE TABLE IF NOT EXISTS jobq_schema (version integer NOT NULL)"
    sql_versions_exist = "SELECT to_regclass('jobq_schema') IS NOT NULL"

    @classmethod
    def is_missing_table(cls, error: BaseException) -> bool:
        return isinstance(error, pgerrors.UndefinedTable)

    def record_version(self, version: int) -> None:
        self.execute("INSERT INTO jobq_schema (version) VALUES (%(v)s)", {"v": version})

    def insert_steps(self, job: NewJob) -> Steps[int]:
        row = yield from self.insert_row_steps(job)
        assert row is not None
        return int(row[0])

    def insert_unique_steps(self, job: NewJob) -> Steps[int | None]:
        row = yield from self.insert_row_steps(job, "ON CONFLICT DO NOTHING")
        return None if row is None else int(row[0])

    def insert_row_steps(self, job: NewJob, taken: str = "") -> Steps[Any]:
        """The new row's id (None when `taken` kept it out): one statement, one round trip."""
        params = self.insert_params(job)
        params["channel"] = NOTIFY_CHANNEL
        return (yield from one(insert_statement(INSERT_NAMES, taken), params))

    def insert_chunks_steps(self, jobs: Sequence[NewJob]) -> Steps[list[int]]:
        # One COPY, not chunks (see insert.py).
        return (yield from copy_steps([self.insert_values(job) for job in jobs]))

    def insert_chunk_steps(self, jobs: Sequence[NewJob]) -> Steps[list[int]]:
        return (yield from self.insert_chunks_steps(jobs))

    def claim(
        self,
        types: Sequence[str],
        token: str,
        lease: float,
        expires_monotonic: float,
        runner: Runner,
    ) -> ClaimedJob | Refused | None:
        params = {"token": token, "lease": lease, **runner.params(), **type_params(types)}
        # A row a concurrency limit refused comes back still pending, and now blocked (or
        # left for the claim that holds its key): the next probe looks past it.
        for _ in range(REFUSALS):
            row = self.fetchone(claim_statement(len(types)), params)
            if row is None:
                return None
            if row[-1] == "in_progress":
                return self.claimed(row, token, expires_monotonic)
        return REFUSED

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.connection.transaction():
            yield

    def complete_and_claim(
        self,
        job_id: int,
        token: str,
        types: Sequence[str],
        new_token: str,
        lease: float,
        runner: Runner,
        result: str | None = None,
    ) -> tuple[bool, ClaimedJob | None]:
        # Both parts in one statement: one round trip instead of a transaction's four.
        params = {
            "id": job_id,
            "token": token,
            "result": result,
            "new_token": new_token,
            "lease": lease,
            **runner.params(),
            **type_params(types),
        }
        expires = expiry(lease)
        row = self.fetchone(complete_and_claim_statement(len(types)), params)
        if row[1] is None:
            return bool(row[0]), None
        if row[-1] != "in_progress":  # refused by a limit: claim again, past it
            return bool(row[0]), claimed_only(self.claim(types, new_token, lease, expires, runner))
        return bool(row[0]), self.claimed(row[1:], new_token, expires)

    def renew(self, job_id: int, token: str, lease: float) -> datetime | None:
        row = self.fetchone(RENEW, {"id": job_id, "token": token, "lease": lease})
        return None if row is None else self.to_datetime(row[0])

    def renew_many(
        self, claims: Sequence[tuple[int, str]], lease: float, started: Mapping[int, float]
    ) -> Renewal:
        # Never prepared: a prepared statement soon gets a generic plan, which guesses a small
        # array and probes the lease index once per claim against every claim (quadratic:
        # 160 ms for 1,000 claims against 5 ms planned with the real arrays).
        with self.connection.cursor() as cursor:
            cursor.execute(
                RENEW_MANY,
                {
                    "lease": lease,
                    "ids": [c[0] for c in claims],
                    "tokens": [c[1] for c in claims],
                    "ages": [started.get(c[0]) for c in claims],
                },
                prepare=False,
            )
            rows = cursor.fetchall()
        return Renewal({int(row[0]) for row in rows}, {int(row[0]) for row in rows if row[1]})

    def bound_statements(self, seconds: float) -> None:
        limit = f"{max(1, round(seconds * 1000))}ms"
        self.fetchone(
            "SELECT set_config('statement_timeout', %(limit)s, false),"
            " set_config('lock_timeout', %(limit)s, false)",
            {"limit": limit},
        )

    def listen(self) -> bool:
        # LISTEN belongs to a session, which a transaction pooler does not keep: through
        # one, wake-ups come over a direct connection (listen_dsn), or idle workers poll.
        # The LISTEN itself waits for the idle mark (idle.py).
        if self.listen_dsn is not None:
            self.listening = psycopg.connect(
                libpq_dsn(self.listen_dsn), autocommit=True, **application_name(self.listen_dsn)
            )
            return True
        return not self.pooled

    def wait_for_jobs(self, timeout: float) -> bool:
        connection = self.listening or self.connection
        for _ in connection.notifies(timeout=timeout, stop_after=1):
            return True
        return False

    sql_complete = COMPLETE

    # A job requeued ready now (a recovery or failure without backoff) wakes idle workers,
    # as an enqueue does; one requeued for later would find them nothing to claim.
    sql_settle = f"""
        WITH settled AS (
            UPDATE jobq_jobs SET
                status = CASE
                    WHEN %(status)s <> 'pending' THEN %(status)s
                    WHEN deadline <= now() + make_interval(secs => %(delay)s) THEN 'expired'
                    ELSE 'pending' END,
                finished_at = CASE
                    WHEN %(status)s = 'pending' AND (deadline IS NULL
                         OR deadline > now() + make_interval(secs => %(delay)s))
                    THEN NULL ELSE now() END,
                scheduled_at = now() + make_interval(secs => %(delay)s),
                token = NULL, lease_until = NULL, last_error = %(error)s, updated_at = now(),
                error_class = %(error_class)s,
                {logged("%(error)s", "%(error_class)s", began=f"coalesce(attempted_at, {BEGAN})")},
                started_at = coalesce(started_at, {BEGAN}),
                attempted_at = coalesce(attempted_at, {BEGAN})
            WHERE id = %(id)s AND token = %(token)s AND {in_progress()}
              AND (NOT %(lease_ended_only)s OR lease_until <= now()) AND cancel_requested_at IS NULL
            RETURNING status, type, scheduled_at <= now() AS ready
        )
        SELECT status, CASE WHEN status = 'pending' AND ready
            THEN pg_notify(%(channel)s, type)::text END
        FROM settled
    """

    sql_expired_leases = """
        SELECT id, token, attempts, max_attempts, backoff, max_backoff, jitter, type,
            cancel_requested_at IS NOT NULL
        FROM jobq_jobs WHERE status = 'in_progress' AND lease_until <= now()
        ORDER BY lease_until LIMIT %(limit)s
    """

    sql_expire_overdue = """
        UPDATE jobq_jobs SET status = 'expired', updated_at = now(), finished_at = now(),
            last_error = 'Deadline passed before the job could run'
        WHERE status = 'pending' AND deadline <= now()
    """

    sql_prune = f"""
        DELETE FROM jobq_jobs WHERE id IN (
            SELECT id FROM jobq_jobs WHERE status IN ({{statuses}})
              AND finished_at < now() - make_interval(secs => %(older_than)s)
              AND {kept(per_row=" OFFSET 0")}
            ORDER BY finished_at LIMIT %(batch)s
        )
    """

    sql_work_left = work_left(READY)
    sql_bring_forward = bring_forward("now()")

    sql_oldest_finished = f"SELECT extract(epoch FROM now() - {OLDEST_FINISHED_AT})"

    @contextmanager
    def pruning(self) -> Iterator[bool]:
        # A transaction-level lock (see Backend.pruning), a key of jobq's beside the
        # install's 4242001 and the idle workers' 4242002 and 4242003 (idle.py).
        with self.connection.transaction():
            yield bool(self.fetchone("SELECT pg_try_advisory_xact_lock(4242004)")[0])

    sql_counts = """
        SELECT type, status, count(*) FROM jobq_jobs
        WHERE %(type)s::text IS NULL OR type = %(type)s::text GROUP BY type, status
    """
