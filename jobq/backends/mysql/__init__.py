"""MySQL and MariaDB through PyMySQL.

Neither has UPDATE … RETURNING, so a claim is a short READ COMMITTED transaction: lock the next
ready row with SELECT … FOR UPDATE SKIP LOCKED, then update it. REPEATABLE READ would take gap
locks on the status index and make concurrent claims deadlock. Times are DATETIME(6) in UTC.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pymysql
from pymysql.constants import CLIENT, SERVER_STATUS

from ...errors import ConfigurationError, InstallLockTimeout
from ...records import ClaimedJob, Status
from ..base import Backend, bring_forward, work_left
from ..limits import REFUSALS
from ..naming import connection_name
from ..pruning import INDEX as PRUNING
from ..pruning import OLDEST_FINISHED_AT
from ..rows import REFUSED, NewJob, Refused, Renewal, Runner
from ..shapes import type_params
from ..steps import Steps, every, last_id, value
from ..workflows import KEPT
from .claims import READY, MysqlBatching, ago, claim_select, later
from .controls import MIGRATION as STATUS_PAGE
from .controls import MysqlControls
from .cursors import ClaimCursors
from .dsn import connect_args
from .events import EVENTS, MysqlEvents
from .limits import LIMITS
from .nodes import MIGRATION as NODE_TABLE
from .nodes import NODES
from .rates import RATES
from .results import ATTEMPT_WRITE, RESULTS, UNCOUNT, logged
from .schema import BINARY_IDENTIFIERS, MIGRATIONS, NOW, TRACE_CONTEXT, WORKER_IDS
from .search import MysqlSearch
from .step_records import STEPS, MysqlStepRecords
from .uniqueness import DECLARED_AT, ON_TAKEN_KEY, MysqlUniqueness
from .uniqueness import MIGRATION as UNIQUENESS
from .workflows import WORKFLOWS, MysqlWorkflows

BY_ID = "FROM jobq_jobs WHERE id = %(id)s"
# How every transaction begins, here and on the async driver: REPEATABLE READ, MySQL's
# default, would take gap locks on the status index and make concurrent claims deadlock.
BEGIN = ("SET TRANSACTION ISOLATION LEVEL READ COMMITTED", "BEGIN")
# Server error numbers: deadlock found, and lock wait timeout exceeded.
TRANSIENT_ERRORS = {1213, 1205}
# Taken by every install and migration script of a database: concurrent ones queue up, for
# as long as a migration of a large table may take.
INSTALL_LOCK = "SELECT GET_LOCK('jobq_install', 600)"
INSTALL_UNLOCK = "SELECT RELEASE_LOCK('jobq_install')"

INSERT_ROW = (
    "(%(type{i})s, %(class_name{i})s, %(payload{i})s, %(max_attempts{i})s, %(backoff{i})s, "
    "%(max_backoff{i})s, %(jitter{i})s, coalesce(%(scheduled_at{i})s, {delay}), "
    "coalesce(%(deadline{i})s, {deadline_in}), %(priority{i})s, {now}, {now}, %(unique_key{i})s, "
    "%(traceparent{i})s, %(tracestate{i})s, %(limit_key{i})s, %(rate_key{i})s, "
    "%(blocked_on{i})s)"
)


def numbered(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Many rows' named parameters as one statement's: name0, name1, ... for each name."""
    return {f"{name}{i}": value for i, row in enumerate(rows) for name, value in row.items()}


def insert_statement(rows: int) -> str:
    values = ", ".join(
        INSERT_ROW.format(
            i=i, delay=later(f"delay{i}"), deadline_in=later(f"deadline_in{i}"), now=NOW
        )
        for i in range(rows)
    )
    return f"""
        INSERT INTO jobq_jobs (type, class_name, payload, max_attempts, backoff, max_backoff,
            jitter, scheduled_at, deadline, priority, created_at, updated_at, unique_key,
            traceparent, tracestate, limit_key, rate_key, blocked_on)
        VALUES {values}
    """


class MysqlBackend(
    MysqlEvents,
    MysqlStepRecords,
    MysqlUniqueness,
    MysqlControls,
    MysqlSearch,
    MysqlBatching,
    MysqlWorkflows,
    Backend,
):
    kind = "mysql"
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
        BINARY_IDENTIFIERS,
        PRUNING,
        (*STEPS, *EVENTS),
        NODE_TABLE,
    )

    def __init__(self, connection: Any, *, owns_connection: bool) -> None:
        super().__init__(connection, owns_connection=owns_connection)
        self.check_binlog()
        # MariaDB 10.5 and later return a multi-row INSERT's ids; MySQL cannot, and
        # enqueue_many falls back to a statement a row there.
        self.returning = "mariadb" in str(connection.get_server_info()).lower()
        self.claim_cursors = ClaimCursors()

    @classmethod
    def connect(cls, dsn: str, create: bool = True) -> MysqlBackend:
        """(`create` does not apply: connecting never creates a server's database.)"""
        # FOUND_ROWS: rowcount counts matched rows, so a renewal that leaves the lease
        # unchanged still reports that it held.
        connection = pymysql.connect(
            **connect_args(dsn),
            autocommit=True,
            client_flag=CLIENT.FOUND_ROWS,
            program_name=connection_name(),
        )
        try:
            return cls(connection, owns_connection=True)
        except BaseException:
            connection.close()  # refused (binary log format): leave no session behind
            raise

    def check_binlog(self) -> None:
        row = self.fetchone("SELECT @@log_bin, @@binlog_format")
        if row and int(row[0]) and str(row[1]).upper() not in ("ROW", "MIXED"):
            raise ConfigurationError(
                f"binary logging is on with binlog_format={row[1]}; jobq's claims are only "
                "safe to replicate with binlog_format ROW or MIXED"
            )

    def transaction_problem(self) -> str | None:
        if not self.connection.open:
            return "the MySQL connection is closed"
        if not self.connection.get_autocommit():
            return "the MySQL connection is not in autocommit mode"
        if self.connection.server_status & SERVER_STATUS.SERVER_STATUS_IN_TRANS:
            return "the MySQL connection has an open transaction"
        return None

    def is_transient(self, error: BaseException) -> bool:
        return (
            isinstance(error, pymysql.err.OperationalError | pymysql.err.InternalError)
            and bool(error.args)
            and error.args[0] in TRANSIENT_ERRORS
        )

    def to_datetime(self, value: Any) -> datetime:
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC)

    def seconds(self, value: float) -> Any:
        return round(value * 1_000_000)

    def moment(self, value: datetime) -> Any:
        return value.astimezone(UTC).replace(tzinfo=None)

    @contextmanager
    def install_lock(self) -> Iterator[None]:
        if self.fetchone(INSTALL_LOCK)[0] != 1:
            raise InstallLockTimeout(
                "another jobq migration has held this database's install lock for 10 minutes: "
                "let it finish (or end the session holding GET_LOCK('jobq_install')), then "
                "run `jobq migrate` again"
            )
        try:
            yield
        finally:
            self.execute(INSTALL_UNLOCK)

    # DDL commits as it goes on MySQL: the lock, not a transaction, keeps scripts apart.
    script_begin = (INSTALL_LOCK,)
    script_end = (INSTALL_UNLOCK,)
    script_delimiter = "$$"

    sql_create_versions = "CREATE TABLE IF NOT EXISTS jobq_schema (version INT NOT NULL)"
    sql_versions_exist = (
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() "
        "AND table_name = 'jobq_schema'"
    )

    @classmethod
    def is_missing_table(cls, error: BaseException) -> bool:
        return isinstance(error, pymysql.err.ProgrammingError) and error.args[:1] == (1146,)

    def record_version(self, version: int) -> None:
        self.execute("INSERT INTO jobq_schema (version) VALUES (%(v)s)", {"v": version})

    def insert_steps(self, job: NewJob) -> Steps[int]:
        return (yield from last_id(insert_statement(1), numbered([self.insert_params(job)])))

    def insert_unique_steps(self, job: NewJob) -> Steps[int | None]:
        params = numbered([self.insert_params(job)])
        job_id = yield from last_id(insert_statement(1) + ON_TAKEN_KEY, params)
        if job_id:
            return job_id
        # MariaDB's reply carries no id when the key was taken and the UPDATE that found its
        # holder ran a trigger (the concurrency limits' BEFORE UPDATE); the id it chose is
        # still this session's LAST_INSERT_ID().
        return int((yield from value("SELECT LAST_INSERT_ID()")))

    def insert_chunk_steps(self, jobs: Sequence[NewJob]) -> Steps[list[int]]:
        if not self.returning:
            ids: list[int] = []
            for job in jobs:
                ids.append((yield from self.insert_steps(job)))
            return ids
        sql = insert_statement(len(jobs)) + " RETURNING id"
        rows = yield from every(sql, numbered([self.insert_params(job) for job in jobs]))
        # Auto-increment ids rise in the order the rows are inserted: the order given.
        return sorted(int(row[0]) for row in rows)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Every transaction jobq opens on MySQL, and the only place that opens one: each is
        READ COMMITTED (see the module's docstring), and nothing else sets that."""
        for statement in BEGIN:
            self.execute(statement)
        try:
            yield
            self.connection.commit()
        except BaseException:
            self.rollback_quietly()
            raise

    def claim(
        self,
        types: Sequence[str],
        token: str,
        lease: float,
        expires_monotonic: float,
        runner: Runner,
    ) -> ClaimedJob | Refused | None:
        self.wake_blocked()
        with self.transaction():
            return self.claim_within(types, token, lease, expires_monotonic, runner)

    def claim_within(
        self,
        types: Sequence[str],
        token: str,
        lease: float,
        expires_monotonic: float,
        runner: Runner,
    ) -> ClaimedJob | Refused | None:
        self.apply_endings()
        params: dict[str, Any] = {"lease": self.seconds(lease), **type_params(types)}
        # A row a concurrency limit refused stays pending, now blocked (or left for the
        # claim that holds its key): the next probe looks past it.
        for _ in range(REFUSALS):
            rows = self.claim_cursors.walk(
                types,
                lambda from_cursor, at: self.fetchall(
                    claim_select(len(types), from_cursor), params | at
                ),
            )
            if not rows:
                return None
            row = rows[0]
            if self.claim_row(row, token, runner):
                return self.claimed(row, token, expires_monotonic)
        return REFUSED

    def claim_row(self, row: Sequence[Any], token: str, runner: Runner) -> bool:
        """Claim the row a probe locked; False when its concurrency limit refused it."""
        self.execute(
            f"""
            UPDATE jobq_jobs SET status = 'in_progress', attempts = attempts + 1,
                token = %(token)s, lease_until = %(lease_until)s, host = %(host)s,
                pid = %(pid)s, worker = %(worker)s, updated_at = {NOW},
                started_at = coalesce(started_at, {NOW}), attempted_at = {NOW}
            WHERE id = %(id)s
            """,
            {"token": token, "lease_until": row[5], "id": row[0], **runner.params()},
        )
        return row[-1] is None or bool(self.claimed_ids([row[0]]))

    def renew(self, job_id: int, token: str, lease: float) -> datetime | None:
        params = {"id": job_id, "token": token, "lease": self.seconds(lease)}
        renewed = self.execute(
            f"""
            UPDATE jobq_jobs SET lease_until = GREATEST(lease_until, {later("lease")})
            WHERE id = %(id)s AND token = %(token)s AND status = 'in_progress'
              AND lease_until > {NOW}
            """,
            params,
        )
        if not renewed:
            return None
        # Only this attempt's own ack can change the row now: its lease was just extended.
        row = self.fetchone(
            "SELECT lease_until FROM jobq_jobs WHERE id = %(id)s AND token = %(token)s", params
        )
        return None if row is None else self.to_datetime(row[0])

    def bound_statements(self, seconds: float) -> None:
        self.execute("SET SESSION innodb_lock_wait_timeout = %s", (max(1, math.ceil(seconds)),))
        version = str(self.fetchone("SELECT VERSION()")[0])
        if "MariaDB" in version:
            self.execute("SET SESSION max_statement_time = %s", (seconds,))
        else:  # MySQL bounds only SELECTs this way; its UPDATEs by the lock wait above
            self.execute("SET SESSION max_execution_time = %s", (max(1, round(seconds * 1000)),))

    def renew_many(
        self, claims: Sequence[tuple[int, str]], lease: float, started: Mapping[int, float]
    ) -> Renewal:
        """One UPDATE for every claim, then a read of which leases now reach a lease past a
        moment pinned before the UPDATE: exactly the ones this round extended, however long
        the UPDATE waited for its locks. MySQL has no UPDATE … RETURNING to do both at once."""
        pairs = ", ".join(f"(%(id{i})s, %(token{i})s)" for i in range(len(claims)))
        pinned = self.fetchone(f"SELECT {NOW}")[0]
        params: dict[str, Any] = {"lease": self.seconds(lease), "pinned": pinned}
        for i, (job_id, token) in enumerate(claims):
            params[f"id{i}"], params[f"token{i}"] = job_id, token
        starts = ""
        if started:
            began = " ".join(f"WHEN %(sid{i})s THEN {ago(f'sage{i}')}" for i in range(len(started)))
            for i, (job_id, age) in enumerate(started.items()):
                params[f"sid{i}"], params[f"sage{i}"] = job_id, self.seconds(age)
            starts = (
                f", started_at = coalesce(started_at, CASE id {began} END)"
                f", attempted_at = coalesce(attempted_at, CASE id {began} END)"
            )
        self.execute(
            f"""
            UPDATE jobq_jobs SET lease_until = GREATEST(lease_until, {later("lease")}){starts}
            WHERE (id, token) IN ({pairs}) AND status = 'in_progress' AND lease_until > {NOW}
            """,
            params,
        )
        rows = self.fetchall(
            f"""
            SELECT id, cancel_requested_at IS NOT NULL FROM jobq_jobs
            WHERE (id, token) IN ({pairs}) AND status = 'in_progress'
              AND lease_until >= DATE_ADD(%(pinned)s, INTERVAL %(lease)s MICROSECOND)
            """,
            params,
        )
        return Renewal({int(row[0]) for row in rows}, {int(row[0]) for row in rows if row[1]})

    def settle(
        self,
        job_id: int,
        token: str,
        status: Status,
        error: str,
        delay: float,
        lease_ended_only: bool,
        error_class: str | None = None,
        began: float | None = None,
    ) -> Status | None:
        """The UPDATE and a read of the status it set, in one transaction (the row stays locked,
        so no claim changes it first), which wakes the freed slot's blocked jobs too."""
        params = self.settle_params(
            job_id, token, status, error, delay, lease_ended_only, error_class, began
        )
        row = None
        with self.transaction():
            if self.execute(self.sql_settle, params) == 1:
                row = self.fetchone(f"SELECT status, type, limit_key {BY_ID}", params)
                self.apply_endings()
                if row[2] is not None:
                    self.wake_key({"type": row[1], "key": row[2]})
        return None if row is None else Status(row[0])

    sql_complete = f"""
        UPDATE jobq_jobs SET status = 'completed', token = NULL, lease_until = NULL,
            updated_at = {NOW}, finished_at = {ago("ended")}, result = %(result)s,
            checkpoint = NULL,
            {logged(began=f"coalesce(attempted_at, {ago('began')})", ended=ago("ended"))},
            started_at = coalesce(started_at, {ago("began")}),
            attempted_at = coalesce(attempted_at, {ago("began")})
        WHERE id = %(id)s AND token = %(token)s AND status = 'in_progress'
          AND cancel_requested_at IS NULL
    """

    # MySQL assigns SET columns left to right, each seeing the ones before: nothing below
    # reads a column that an earlier assignment changed.
    sql_attempt_write = ATTEMPT_WRITE
    sql_uncount = UNCOUNT

    sql_settle = f"""
        UPDATE jobq_jobs SET
            {logged("%(error)s", "%(error_class)s", f"coalesce(attempted_at, {ago('began')})")},
            error_class = %(error_class)s,
            finished_at = CASE
                WHEN %(status)s = 'pending' AND (deadline IS NULL OR deadline > {later("delay")})
                THEN NULL ELSE {NOW} END,
            status = CASE
                WHEN %(status)s <> 'pending' THEN %(status)s
                WHEN deadline <= {later("delay")} THEN 'expired'
                ELSE 'pending' END,
            scheduled_at = {later("delay")},
            token = NULL, lease_until = NULL, last_error = %(error)s, updated_at = {NOW},
            started_at = coalesce(started_at, {ago("began")}),
            attempted_at = coalesce(attempted_at, {ago("began")})
        WHERE id = %(id)s AND token = %(token)s AND status = 'in_progress'
          AND (NOT %(lease_ended_only)s OR lease_until <= {NOW}) AND cancel_requested_at IS NULL
    """

    sql_expired_leases = f"""
        SELECT id, token, attempts, max_attempts, backoff, max_backoff, jitter, type,
            cancel_requested_at IS NOT NULL
        FROM jobq_jobs WHERE status = 'in_progress' AND lease_until <= {NOW}
        ORDER BY lease_until LIMIT %(limit)s
    """

    sql_expire_overdue = f"""
        UPDATE jobq_jobs SET status = 'expired', updated_at = {NOW}, finished_at = {NOW},
            last_error = 'Deadline passed before the job could run'
        WHERE status = 'pending' AND deadline <= {NOW}
    """

    # Picks the ids only (see delete_finished), locking them as enqueue's after= locks a
    # parent: no dependent can be added to one between the pick and the delete. The pruning
    # index named: on its own, MariaDB takes it for the status alone (ref, then
    # every finished row of the status walked to find the few past the cutoff), or walks
    # finished_at across every status.
    sql_prune = f"""
        SELECT id FROM jobq_jobs FORCE INDEX (jobq_jobs_pruning) WHERE status IN ({{statuses}})
          AND finished_at < DATE_SUB({NOW}, INTERVAL %(older_than)s MICROSECOND) AND {KEPT}
        ORDER BY finished_at LIMIT %(batch)s FOR UPDATE
    """

    deletion = "{select} FOR UPDATE"

    def delete_finished(self, sql: str, params: dict[str, Any]) -> int:
        # MySQL refuses a DELETE that reads jobq_dependencies (KEPT does) while its trigger
        # deletes the pruned jobs' edges from it (error 1442): the ids are picked first, in
        # the same transaction.
        with self.transaction():
            ids = [row[0] for row in self.fetchall(sql, params)]
            if not ids:
                return 0
            marks, picked = self.marks("id", ids)
            return self.execute(f"DELETE FROM jobq_jobs WHERE id IN ({marks})", picked)

    sql_work_left = work_left(READY)
    sql_bring_forward = bring_forward(NOW)

    sql_oldest_finished = f"""
        SELECT TIMESTAMPDIFF(MICROSECOND, {OLDEST_FINISHED_AT}, {NOW}) / 1000000
    """

    @contextmanager
    def pruning(self) -> Iterator[bool]:
        # A named lock is the session's: it is let go at once, after the batch's statement
        # (autocommitted), and with the connection should that be lost.
        taken = self.fetchone("SELECT GET_LOCK('jobq_prune', 0)")[0] == 1
        try:
            yield taken
        finally:
            if taken:
                self.execute("SELECT RELEASE_LOCK('jobq_prune')")

    sql_counts = """
        SELECT type, status, count(*) FROM jobq_jobs
        WHERE %(type)s IS NULL OR type = %(type)s GROUP BY type, status
    """
