"""SQLite through the standard library: the claim is one UPDATE … RETURNING; writers serialise.

Times are stored as Unix seconds (REAL), read from SQLite's own clock.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...errors import ConfigurationError, NoSchema
from ...records import ClaimedJob, Claims
from ..base import Backend, bring_forward, work_left
from ..batching import in_picked_order
from ..limits import REFUSALS
from ..pruning import OLDEST_FINISHED_AT
from ..pruning import PARTIAL_INDEX as PRUNING
from ..rows import REFUSED, NewJob, Refused, Renewal, Runner
from ..shapes import type_params
from ..steps import Fetch, Statement, Step, Steps, every, fetched
from ..workflows import KEPT
from .claims import claim_many_statement, claim_statement, picked_count_statement
from .controls import MIGRATION as STATUS_PAGE
from .controls import SqliteControls
from .events import EVENTS, SqliteEvents
from .limits import LIMITS, SqliteLimits
from .nodes import MIGRATION as NODE_TABLE
from .nodes import NODES
from .rates import RATES
from .results import ATTEMPT_WRITE, RESULTS, UNCOUNT, logged
from .schema import MIGRATIONS, NOW, READY, TRACE_CONTEXT, WORKER_IDS
from .search import SqliteSearch
from .step_records import STEPS, SqliteStepRecords
from .uniqueness import DECLARED_AT, SqliteUniqueness
from .uniqueness import MIGRATION as UNIQUENESS
from .workflows import WORKFLOWS, SqliteWorkflows

# The single-statement claim needs UPDATE … RETURNING.
MIN_VERSION = (3, 35, 0)


# Positional parameters, in the order of INSERT_NAMES: SQLite looks each named parameter up
# in a list of the statement's names, which made a chunk of 2,000 rows take half a second.
INSERT_ROW = (
    f"(?, ?, ?, ?, ?, ?, ?, coalesce(?, {NOW} + ?), coalesce(?, {NOW} + ?), ?, ?, ?, ?, ?, ?, ?)"
)


def path_of(dsn: str) -> str:
    """sqlite:///relative/file, sqlite:////absolute/file or sqlite:///:memory:."""
    path = dsn.split(":", 1)[1]
    if not path.startswith("///") or path == "///":
        raise ConfigurationError(
            "an SQLite DSN looks like sqlite:///relative/path.db or sqlite:////absolute/path.db"
        )
    return path[3:]


class SqliteBackend(
    SqliteEvents,
    SqliteStepRecords,
    SqliteUniqueness,
    SqliteControls,
    SqliteSearch,
    SqliteLimits,
    SqliteWorkflows,
    Backend,
):
    kind = "sqlite"
    node_sql = NODES
    migrations = (
        *MIGRATIONS,
        UNIQUENESS,
        STATUS_PAGE,
        WORKER_IDS,
        DECLARED_AT,
        TRACE_CONTEXT,
        RESULTS,
        LIMITS,
        WORKFLOWS,
        RATES,
        PRUNING,
        (*STEPS, *EVENTS),
        NODE_TABLE,
    )

    def __init__(self, connection: sqlite3.Connection, *, owns_connection: bool) -> None:
        self.check_version()
        super().__init__(connection, owns_connection=owns_connection)

    @staticmethod
    def check_version() -> None:
        if sqlite3.sqlite_version_info < MIN_VERSION:
            raise ConfigurationError(
                f"jobq needs SQLite {'.'.join(map(str, MIN_VERSION))} or newer for "
                f"UPDATE … RETURNING; this Python has SQLite {sqlite3.sqlite_version}"
            )

    @classmethod
    def connect(cls, dsn: str, create: bool = True) -> SqliteBackend:
        cls.check_version()  # before the file is created
        path = target = path_of(dsn)
        if not create and path != ":memory:":
            if not os.path.exists(path):
                raise NoSchema(f"the SQLite database {path} does not exist")
            # Read-write without create: should the file vanish meanwhile, none is made.
            target = Path(path).absolute().as_uri() + "?mode=rw"
        # check_same_thread=False: a Queue may be handed to another thread, though never
        # used from two at once. isolation_level=None: autocommit, as consumers require.
        connection = sqlite3.connect(
            target, timeout=5.0, isolation_level=None, check_same_thread=False, uri=target != path
        )
        backend = cls(connection, owns_connection=True)
        backend.use_wal()
        return backend

    def use_wal(self) -> None:
        """WAL lets readers work while a worker writes; the setting sticks to the file.

        Many workers opening a new file at once all try to switch it; the switch needs the
        file to themselves, so all but one are told the database is busy. The one that wins
        switches it for everybody.
        """
        if self.fetchone("PRAGMA journal_mode")[0] == "wal":
            return
        try:
            self.connection.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as error:
            if not self.is_transient(error):
                raise

    def transaction_problem(self) -> str | None:
        try:
            self.connection.total_changes  # noqa: B018 - raises once the connection is closed
        except sqlite3.ProgrammingError:
            return "the SQLite connection is closed"
        if self.connection.isolation_level is not None:
            return "the SQLite connection is not in autocommit mode (isolation_level=None)"
        if self.connection.in_transaction:
            return "the SQLite connection has an open transaction"
        return None

    def is_transient(self, error: BaseException) -> bool:
        code = getattr(error, "sqlite_errorcode", None)
        # Extended codes carry the primary one in the low byte: SQLITE_BUSY 5, SQLITE_LOCKED 6.
        return (
            isinstance(error, sqlite3.OperationalError)
            and code is not None
            and (code & 0xFF in (5, 6))
        )

    def to_datetime(self, value: Any) -> datetime:
        return datetime.fromtimestamp(float(value), UTC)

    def moment(self, value: datetime) -> Any:
        return value.timestamp()

    def execute(self, sql: str, params: Any = None, connection: Any = None) -> int:
        # sqlite3 cursors are not context managers.
        cursor = (connection or self.connection).execute(sql, params or ())
        return int(cursor.rowcount)

    def fetchone(self, sql: str, params: Any = None) -> Any:
        return self.perform(Statement(sql, params, Fetch.ONE), self.connection)

    def fetchall(self, sql: str, params: Any = None) -> list[Any]:
        return list(self.connection.execute(sql, params or ()).fetchall())

    def perform(self, step: Step, connection: Any) -> Any:
        assert isinstance(step, Statement), "only PostgreSQL copies rows"
        cursor = connection.execute(step.sql, step.params or ())
        try:
            return fetched(cursor, step.fetch)
        finally:
            cursor.close()  # a … RETURNING statement holds its write lock until the cursor is done

    @contextmanager
    def transaction(self) -> Iterator[None]:
        # IMMEDIATE: take the write lock up front, so the transaction cannot fail half-way
        # for want of it.
        self.connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.rollback_quietly()
            raise
        self.connection.execute("COMMIT")

    install_lock = transaction
    # As transaction(): the write lock, taken at BEGIN, keeps scripts and installs apart.
    script_begin = ("BEGIN IMMEDIATE",)
    script_end = ("COMMIT",)

    sql_create_versions = "CREATE TABLE IF NOT EXISTS jobq_schema (version INTEGER NOT NULL)"
    sql_versions_exist = (
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'jobq_schema'"
    )

    @classmethod
    def is_missing_table(cls, error: BaseException) -> bool:
        return isinstance(error, sqlite3.OperationalError) and "no such table" in str(error)

    def record_version(self, version: int) -> None:
        self.execute("INSERT INTO jobq_schema (version) VALUES (:v)", {"v": version})

    def insert_steps(self, job: NewJob) -> Steps[int]:
        (job_id,) = yield from self.insert_chunk_steps([job])
        return job_id

    def insert_unique_steps(self, job: NewJob) -> Steps[int | None]:
        ids = yield from self.insert_chunk_steps([job], taken="ON CONFLICT DO NOTHING")
        return ids[0] if ids else None

    # Eighteen parameters a row, under SQLite's limit of 32,766 a statement.
    chunk_rows = 1800

    def insert_chunk_steps(self, jobs: Sequence[NewJob], taken: str = "") -> Steps[list[int]]:
        """`taken`: what a row whose unique_key is taken does (only rows with a key say)."""
        values = ", ".join([INSERT_ROW] * len(jobs))
        sql = f"""
            INSERT INTO jobq_jobs (type, class_name, payload, max_attempts, backoff,
                max_backoff, jitter, scheduled_at, deadline, priority, unique_key, traceparent,
                tracestate, limit_key, rate_key, blocked_on)
            VALUES {values} {taken}
            RETURNING id
        """
        params = [value for job in jobs for value in self.insert_values(job)]
        rows = yield from every(sql, params)
        # AUTOINCREMENT ids rise in the order the rows are inserted, which is the order given.
        return sorted(int(row[0]) for row in rows)

    def claim(
        self,
        types: Sequence[str],
        token: str,
        lease: float,
        expires_monotonic: float,
        runner: Runner,
    ) -> ClaimedJob | Refused | None:
        params = {"token": token, "lease": lease, **runner.params(), **type_params(types)}
        # A row a concurrency limit refused is blocked by the trigger, which changes it but
        # returns nothing: then the next probe looks past it.
        for _ in range(REFUSALS):
            changes = self.connection.total_changes
            row = self.fetchone(claim_statement(len(types)), params)
            if row is not None:
                return self.claimed(row, token, expires_monotonic)
            if self.connection.total_changes == changes:
                return None
        return REFUSED

    def claim_many(
        self,
        types: Sequence[str],
        tokens: Sequence[str],
        lease: float,
        expires_monotonic: float,
        runner: Runner,
    ) -> Claims | Refused:
        params = {
            "n": len(tokens),
            "tokens": json.dumps(list(tokens)),
            "lease": self.seconds(lease),
            **runner.params(),
            **type_params(types),
        }
        # The rows a limit refused are changed (blocked, or scheduled later) but not
        # returned: they are what the rows picked leave over the rows claimed. Another
        # process may write between the count and the claim, so the count is what the
        # adaptive prefetch needs (was the backlog deep?), not an exact tally.
        (picked,) = self.fetchone(picked_count_statement(len(types)), params)
        changes = self.connection.total_changes
        rows = self.fetchall(claim_many_statement(len(types)), params)
        if not rows and self.connection.total_changes != changes:
            return REFUSED
        refused = max(0, int(picked) - len(rows))
        return in_picked_order(self.claims_of(rows, expires_monotonic), tokens, refused)

    def renew(self, job_id: int, token: str, lease: float) -> datetime | None:
        row = self.fetchone(
            f"""
            UPDATE jobq_jobs SET lease_until = max(lease_until, {NOW} + :lease)
            WHERE id = :id AND token = :token AND status = 'in_progress'
              AND lease_until > {NOW}
            RETURNING lease_until
            """,
            {"id": job_id, "token": token, "lease": lease},
        )
        return None if row is None else self.to_datetime(row[0])

    def bound_statements(self, seconds: float) -> None:
        """In-process: a statement ends with the process that runs it, when the renewer is
        killed; there is no server to run it on."""

    def renew_many(
        self, claims: Sequence[tuple[int, str]], lease: float, started: Mapping[int, float]
    ) -> Renewal:
        began = f"{NOW} - json_extract(:started, '$.\"' || id || '\"')"
        rows = self.fetchall(
            f"""
            UPDATE jobq_jobs SET lease_until = max(lease_until, {NOW} + :lease),
                started_at = coalesce(started_at, {began}),
                attempted_at = coalesce(attempted_at, {began})
            WHERE status = 'in_progress' AND lease_until > {NOW}
              AND (id, token) IN (
                  SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]')
                  FROM json_each(:claims)
              )
            RETURNING id, cancel_requested_at IS NOT NULL
            """,
            {
                "lease": lease,
                "claims": json.dumps([list(claim) for claim in claims]),
                "started": json.dumps({str(job_id): age for job_id, age in started.items()}),
            },
        )
        return Renewal({int(row[0]) for row in rows}, {int(row[0]) for row in rows if row[1]})

    # Forced: with statistics, SQLite would rather scan the whole table than trust an index
    # on the status for the few rows in progress.
    sql_held_by = (
        "SELECT id, token, type FROM jobq_jobs INDEXED BY jobq_jobs_leases "
        "WHERE status = 'in_progress' AND worker = :worker"
    )

    sql_release = f"""
        UPDATE jobq_jobs SET status = 'pending', attempts = attempts - 1, token = NULL,
            lease_until = NULL, updated_at = {NOW}
        WHERE id = :id AND token = :token AND status = 'in_progress'
          AND cancel_requested_at IS NULL
    """

    sql_complete = f"""
        UPDATE jobq_jobs SET status = 'completed', token = NULL, lease_until = NULL,
            updated_at = {NOW}, finished_at = {NOW} - :ended, result = :result,
            checkpoint = NULL, started_at = coalesce(started_at, {NOW} - :began),
            attempted_at = coalesce(attempted_at, {NOW} - :began),
            {logged(began=f"coalesce(attempted_at, {NOW} - :began)", ended=f"{NOW} - :ended")}
        WHERE id = :id AND token = :token AND status = 'in_progress'
          AND cancel_requested_at IS NULL
    """

    sql_attempt_write = ATTEMPT_WRITE
    sql_uncount = UNCOUNT

    sql_settle = f"""
        UPDATE jobq_jobs SET
            status = CASE
                WHEN :status <> 'pending' THEN :status
                WHEN deadline <= {NOW} + :delay THEN 'expired'
                ELSE 'pending' END,
            finished_at = CASE
                WHEN :status = 'pending' AND (deadline IS NULL OR deadline > {NOW} + :delay)
                THEN NULL ELSE {NOW} END,
            scheduled_at = {NOW} + :delay,
            token = NULL, lease_until = NULL, last_error = :error, updated_at = {NOW},
            error_class = :error_class,
            {logged(":error", ":error_class", began=f"coalesce(attempted_at, {NOW} - :began)")},
            started_at = coalesce(started_at, {NOW} - :began),
            attempted_at = coalesce(attempted_at, {NOW} - :began)
        WHERE id = :id AND token = :token AND status = 'in_progress'
          AND (NOT :lease_ended_only OR lease_until <= {NOW}) AND cancel_requested_at IS NULL
        RETURNING status
    """

    sql_expired_leases = f"""
        SELECT id, token, attempts, max_attempts, backoff, max_backoff, jitter, type,
            cancel_requested_at IS NOT NULL
        FROM jobq_jobs WHERE status = 'in_progress' AND lease_until <= {NOW}
        ORDER BY lease_until LIMIT :limit
    """

    sql_expire_overdue = f"""
        UPDATE jobq_jobs SET status = 'expired', updated_at = {NOW}, finished_at = {NOW},
            last_error = 'Deadline passed before the job could run'
        WHERE status = 'pending' AND deadline <= {NOW}
    """

    sql_prune = f"""
        DELETE FROM jobq_jobs WHERE id IN (
            SELECT id FROM jobq_jobs WHERE status IN ({{statuses}})
              AND finished_at < {NOW} - :older_than AND {KEPT}
            ORDER BY finished_at LIMIT :batch
        )
    """

    sql_work_left = work_left(READY)
    sql_bring_forward = bring_forward(NOW)

    sql_oldest_finished = f"SELECT {NOW} - {OLDEST_FINISHED_AT}"

    @contextmanager
    def pruning(self) -> Iterator[bool]:
        # The database's own write lock, taken at BEGIN IMMEDIATE, is the pruners' lock: two
        # connections to one file never write at once.
        with self.transaction():
            yield True

    placeholder = ":{}"
    sql_counts = """
        SELECT type, status, count(*) FROM jobq_jobs
        WHERE :type IS NULL OR type = :type GROUP BY type, status
    """
