"""PostgreSQL through psycopg 3: claims are one UPDATE over a row picked FOR UPDATE SKIP LOCKED."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cache
from typing import Any

import psycopg
from psycopg import errors as pgerrors
from psycopg.pq import TransactionStatus

from ..records import ClaimedJob
from .base import Backend, NewJob, expiry

# Wakes idle workers: the payload is the job's type.
NOTIFY_CHANNEL = "jobq_jobs"

CLAIM_COLUMNS = (
    "id, type, class_name, payload, attempts, lease_until, "
    "max_attempts, backoff, max_backoff, jitter, deadline"
)

READY = (
    "status = 'pending' AND scheduled_at <= now() "
    "AND (deadline IS NULL OR deadline > now()) AND attempts < max_attempts"
)

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """
        CREATE TABLE IF NOT EXISTS jobq_jobs (
            id           bigserial PRIMARY KEY,
            type         text NOT NULL,
            class_name   text NOT NULL,
            payload      text NOT NULL,
            status       text NOT NULL DEFAULT 'pending',
            attempts     integer NOT NULL DEFAULT 0,
            max_attempts integer NOT NULL,
            backoff      double precision NOT NULL,
            max_backoff  double precision NOT NULL,
            jitter       boolean NOT NULL,
            token        text,
            lease_until  timestamptz,
            scheduled_at timestamptz NOT NULL,
            deadline     timestamptz,
            last_error   text,
            created_at   timestamptz NOT NULL DEFAULT now(),
            updated_at   timestamptz NOT NULL DEFAULT now(),
            finished_at  timestamptz,
            CONSTRAINT jobq_jobs_status_check CHECK
                (status IN ('pending', 'in_progress', 'completed', 'failed', 'expired'))
        )
        """,
        # The claim reads only pending rows, in schedule order, with or without a type.
        "CREATE INDEX IF NOT EXISTS jobq_jobs_ready ON jobq_jobs (scheduled_at, id) "
        "WHERE status = 'pending'",
        "CREATE INDEX IF NOT EXISTS jobq_jobs_ready_by_type ON jobq_jobs (type, scheduled_at, id) "
        "WHERE status = 'pending'",
        "CREATE INDEX IF NOT EXISTS jobq_jobs_leases ON jobq_jobs (lease_until) "
        "WHERE status = 'in_progress'",
        "CREATE INDEX IF NOT EXISTS jobq_jobs_deadlines ON jobq_jobs (deadline) "
        "WHERE status = 'pending' AND deadline IS NOT NULL",
        "CREATE INDEX IF NOT EXISTS jobq_jobs_finished ON jobq_jobs (finished_at) "
        "WHERE finished_at IS NOT NULL",
    ),
)


COMPLETE = """
        UPDATE jobq_jobs SET status = 'completed', token = NULL, lease_until = NULL,
            updated_at = now(), finished_at = now()
        WHERE id = %(id)s AND token = %(token)s AND status = 'in_progress'
"""


@cache
def claim_statement(typed: bool, token_param: str = "token") -> str:
    where = READY + (" AND type = ANY(%(types)s)" if typed else "")
    return f"""
        UPDATE jobq_jobs SET status = 'in_progress', attempts = attempts + 1,
            token = %({token_param})s, lease_until = now() + make_interval(secs => %(lease)s),
            updated_at = now()
        WHERE id = (
            SELECT id FROM jobq_jobs WHERE {where}
            ORDER BY scheduled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED
        )
        RETURNING {CLAIM_COLUMNS}
    """


@cache
def complete_and_claim_statement(typed: bool) -> str:
    """The acknowledgement and the next claim as one statement: one round trip and one commit
    per job. It always returns one row: whether the acknowledgement applied, then the claimed
    row's columns (NULL when nothing was ready). The claim cannot pick the row being
    acknowledged: both parts read one snapshot, in which that row is still in progress."""
    return f"""
        WITH done AS ({COMPLETE} RETURNING id),
        claimed AS ({claim_statement(typed, "new_token")})
        SELECT EXISTS (SELECT FROM done), claimed.*
        FROM (VALUES (1)) AS one LEFT JOIN claimed ON true
    """


class PostgresBackend(Backend):
    kind = "postgresql"
    migrations = MIGRATIONS

    def __init__(self, connection: psycopg.Connection[Any], *, owns_connection: bool) -> None:
        super().__init__(connection, owns_connection=owns_connection)
        self.cursor: psycopg.Cursor[Any] | None = None

    def fetchone(self, sql: str, params: Any = None) -> Any:
        # One cursor for the connection's life: making one per statement (with its own
        # adapter map) was a measurable share of a worker's CPU per job.
        if self.cursor is None or self.cursor.closed:
            self.cursor = self.connection.cursor()
        self.cursor.execute(sql, params)
        return self.cursor.fetchone()

    @classmethod
    def connect(cls, dsn: str, create: bool = True) -> PostgresBackend:
        """(`create` does not apply: connecting never creates a server's database.)"""
        scheme, rest = dsn.split("://", 1)
        # libpq takes only postgresql:// and postgres:// in lower case; jobq takes any case.
        dsn = f"postgresql://{rest}" if scheme.lower() in ("postgres", "postgresql") else dsn
        return cls(psycopg.connect(dsn, autocommit=True), owns_connection=True)

    def transaction_problem(self) -> str | None:
        if self.connection.closed:
            return "the PostgreSQL connection is closed"
        if not self.connection.autocommit:
            return "the PostgreSQL connection is not in autocommit mode"
        if self.connection.info.transaction_status != TransactionStatus.IDLE:
            return "the PostgreSQL connection has an open transaction"
        return None

    def is_transient(self, error: BaseException) -> bool:
        return isinstance(
            error,
            pgerrors.DeadlockDetected | pgerrors.LockNotAvailable | pgerrors.SerializationFailure,
        )

    def to_datetime(self, value: Any) -> datetime:
        assert isinstance(value, datetime)
        return value.astimezone(UTC)

    @contextmanager
    def install_lock(self) -> Iterator[None]:
        # An arbitrary constant shared by every jobq install: concurrent installs queue up.
        self.execute("SELECT pg_advisory_lock(4242001)")
        try:
            yield
        finally:
            self.execute("SELECT pg_advisory_unlock(4242001)")

    sql_create_versions = "CREATE TABLE IF NOT EXISTS jobq_schema (version integer NOT NULL)"
    sql_versions_exist = "SELECT to_regclass('jobq_schema') IS NOT NULL"

    @classmethod
    def is_missing_table(cls, error: BaseException) -> bool:
        return isinstance(error, pgerrors.UndefinedTable)

    def record_version(self, version: int) -> None:
        self.execute("INSERT INTO jobq_schema (version) VALUES (%(v)s)", {"v": version})

    def insert(self, job: NewJob, connection: Any = None) -> int:
        # NOTIFY in the same statement: sent on commit, so a rolled-back enqueue wakes nobody.
        sql = """
            WITH job AS (
                INSERT INTO jobq_jobs (type, class_name, payload, max_attempts, backoff,
                    max_backoff, jitter, scheduled_at, deadline)
                VALUES (%(type)s, %(class_name)s, %(payload)s, %(max_attempts)s, %(backoff)s,
                    %(max_backoff)s, %(jitter)s,
                    coalesce(%(scheduled_at)s::timestamptz,
                             now() + make_interval(secs => %(delay)s)),
                    coalesce(%(deadline)s::timestamptz,
                             now() + make_interval(secs => %(deadline_in)s::float8)))
                RETURNING id, type
            )
            SELECT id, pg_notify(%(channel)s, type) FROM job
        """
        params = self.insert_params(job) | {"channel": NOTIFY_CHANNEL}
        with (connection or self.connection).cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        assert row is not None
        return int(row[0])

    def claim(
        self, types: Sequence[str], token: str, lease: float, expires_monotonic: float
    ) -> ClaimedJob | None:
        params = {"token": token, "lease": lease, "types": list(types)}
        row = self.fetchone(claim_statement(bool(types)), params)
        return None if row is None else self.claimed(row, token, expires_monotonic)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.connection.transaction():
            yield

    def complete_and_claim(
        self, job_id: int, token: str, types: Sequence[str], new_token: str, lease: float
    ) -> tuple[bool, ClaimedJob | None]:
        # Both parts in one statement: one round trip instead of a transaction's four.
        params = {
            "id": job_id,
            "token": token,
            "new_token": new_token,
            "lease": lease,
            "types": list(types),
        }
        expires = expiry(lease)
        row = self.fetchone(complete_and_claim_statement(bool(types)), params)
        claimed = None if row[1] is None else self.claimed(row[1:], new_token, expires)
        return bool(row[0]), claimed

    def renew(self, job_id: int, token: str, lease: float) -> datetime | None:
        row = self.fetchone(
            """
            UPDATE jobq_jobs
            SET lease_until = greatest(lease_until, now() + make_interval(secs => %(lease)s))
            WHERE id = %(id)s AND token = %(token)s AND status = 'in_progress'
              AND lease_until > now()
            RETURNING lease_until
            """,
            {"id": job_id, "token": token, "lease": lease},
        )
        return None if row is None else self.to_datetime(row[0])

    def renew_many(self, claims: Sequence[tuple[int, str]], lease: float) -> set[int]:
        # Never prepared: a prepared statement soon gets a generic plan, which guesses a small
        # array and probes the lease index once per claim against every claim (quadratic:
        # 160 ms for 1,000 claims against 5 ms planned with the real arrays).
        with self.connection.cursor() as cursor:
            cursor.execute(
                """
            UPDATE jobq_jobs AS j
            SET lease_until = greatest(j.lease_until, now() + make_interval(secs => %(lease)s))
            FROM unnest(%(ids)s::bigint[], %(tokens)s::text[]) AS c(id, token)
            WHERE j.id = c.id AND j.token = c.token AND j.status = 'in_progress'
              AND j.lease_until > now()
            RETURNING j.id
            """,
                {"lease": lease, "ids": [c[0] for c in claims], "tokens": [c[1] for c in claims]},
                prepare=False,
            )
            return {int(row[0]) for row in cursor.fetchall()}

    def bound_statements(self, seconds: float) -> None:
        limit = f"{max(1, round(seconds * 1000))}ms"
        self.fetchone(
            "SELECT set_config('statement_timeout', %(limit)s, false),"
            " set_config('lock_timeout', %(limit)s, false)",
            {"limit": limit},
        )

    def listen(self) -> bool:
        self.execute(f"LISTEN {NOTIFY_CHANNEL}")
        return True

    def wait_for_jobs(self, timeout: float) -> bool:
        for _ in self.connection.notifies(timeout=timeout, stop_after=1):
            return True
        return False

    sql_complete = COMPLETE

    sql_settle = """
        UPDATE jobq_jobs SET
            status = CASE
                WHEN %(status)s <> 'pending' THEN %(status)s
                WHEN deadline <= now() + make_interval(secs => %(delay)s) THEN 'expired'
                ELSE 'pending' END,
            finished_at = CASE
                WHEN %(status)s = 'pending'
                     AND (deadline IS NULL OR deadline > now() + make_interval(secs => %(delay)s))
                THEN NULL ELSE now() END,
            scheduled_at = now() + make_interval(secs => %(delay)s),
            token = NULL, lease_until = NULL, last_error = %(error)s, updated_at = now()
        WHERE id = %(id)s AND token = %(token)s AND status = 'in_progress'
          AND (NOT %(lease_ended_only)s OR lease_until <= now())
        RETURNING status
    """

    sql_expired_leases = """
        SELECT id, token, attempts, max_attempts, backoff, max_backoff, jitter, type
        FROM jobq_jobs WHERE status = 'in_progress' AND lease_until <= now()
        ORDER BY lease_until LIMIT %(limit)s
    """

    sql_expire_overdue = """
        UPDATE jobq_jobs SET status = 'expired', updated_at = now(), finished_at = now(),
            last_error = 'Deadline passed before the job could run'
        WHERE status = 'pending' AND deadline <= now()
    """

    sql_prune = """
        DELETE FROM jobq_jobs WHERE status IN ('completed', 'failed', 'expired')
          AND finished_at < now() - make_interval(secs => %(older_than)s)
    """

    sql_get = """
        SELECT id, type, class_name, payload, status, attempts, max_attempts, backoff,
               max_backoff, jitter, last_error, scheduled_at, deadline, lease_until,
               created_at, updated_at, finished_at
        FROM jobq_jobs WHERE id = %(id)s
    """

    sql_counts = """
        SELECT type, status, count(*) FROM jobq_jobs
        WHERE %(type)s::text IS NULL OR type = %(type)s::text GROUP BY type, status
    """

    sql_oldest_ready = f"""
        SELECT type, extract(epoch FROM now() - min(scheduled_at)) FROM jobq_jobs
        WHERE {READY} GROUP BY type
    """
