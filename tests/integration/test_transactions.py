"""Transaction rules: consumers need autocommit, producers may enqueue inside a transaction,
and statements the database aborts transiently are retried."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pymysql
import pytest

import jobq
from jobq.queue.controls import why_not_retried
from tests.support import drivers
from tests.support.jobs import Boom, Noop
from tests.support.waiting import wait_for

pytestmark = pytest.mark.lease(60)


CONSUMER_OPERATIONS: dict[str, Callable[[jobq.Queue, jobq.ClaimedJob], Any]] = {
    "claim": lambda q, c: q.claim(),
    "complete": lambda q, c: q.complete(c),
    "fail": lambda q, c: q.fail(c, "x"),
    "renew": lambda q, c: q.renew(c),
    "run_maintenance": lambda q, c: q.run_maintenance(),
    "prune": lambda q, c: q.prune(60),
    "process_jobs": lambda q, c: q.process_jobs(1),
    "process_next": lambda q, c: q.process_next(),
}


@pytest.mark.parametrize("operation", sorted(CONSUMER_OPERATIONS))
def test_consumers_refuse_a_connection_in_a_transaction(
    queue: jobq.Queue, dsn: str, db_kind: str, operation: str
) -> None:
    queue.enqueue(Noop())
    claim = queue.claim()
    assert claim is not None
    run = CONSUMER_OPERATIONS[operation]

    manual = drivers.connect(dsn, db_kind, autocommit=False)
    try:
        with pytest.raises(RuntimeError, match="autocommit"):
            run(jobq.Queue.from_connection(manual), claim)
    finally:
        manual.close()

    app = drivers.connect(dsn, db_kind, autocommit=True)
    try:
        drivers.begin(app, db_kind)
        with pytest.raises(RuntimeError, match="open transaction"):
            run(jobq.Queue.from_connection(app), claim)
        app.rollback()
        # The refusal changed nothing: the attempt is still ours to finish.
        assert queue.complete(claim) is True
    finally:
        app.close()


def test_enqueue_joins_the_applications_transaction(
    queue: jobq.Queue, dsn: str, db_kind: str
) -> None:
    app = drivers.connect(dsn, db_kind, autocommit=False)
    try:
        queue.enqueue(Noop(), connection=app)
        # A read, not a claim: SQLite would make a claim wait for the app's write lock.
        assert queue.counts() == {}, "uncommitted jobs are invisible to workers"
        app.rollback()
        assert queue.counts() == {}
        kept = queue.enqueue(Noop(), connection=app)
        app.commit()
    finally:
        app.close()
    claim = queue.claim()
    assert claim is not None
    assert claim.id == kept


def test_a_retry_refused_for_a_held_key_leaves_the_applications_transaction_whole(
    queue: jobq.Queue, dsn: str, db_kind: str
) -> None:
    failed = queue.enqueue(Boom(), retry=jobq.RetryPolicy(max_attempts=1), unique_key="k")
    queue.process_jobs(1)
    queue.enqueue(Noop(), unique_key="k")
    app = drivers.connect(dsn, db_kind, autocommit=False)
    try:
        kept = queue.enqueue(Noop(), type="kept", connection=app)
        assert jobq.Queue.from_connection(app).retry(failed) is False
        app.commit()  # a PostgreSQL transaction aborted by the index would be rolled back
    finally:
        app.close()
    record = queue.get(kept)
    assert record is not None
    assert record.status == "pending"


# A session of this database waiting for a lock, as another session counts them.
LOCK_WAITS = {
    "postgresql": "SELECT count(*) FROM pg_stat_activity "
    "WHERE wait_event_type = 'Lock' AND datname = current_database()",
    "mariadb": "SELECT count(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'",
}


def lock_waits(connection: Any, db_kind: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(LOCK_WAITS[db_kind])
        return int(cursor.fetchone()[0])


@pytest.mark.databases("postgresql", "mariadb")
def test_a_retry_racing_an_enqueue_of_its_key_is_refused_not_an_error(
    queue: jobq.Queue, dsn: str, db_kind: str
) -> None:
    failed = queue.enqueue(Boom(), retry=jobq.RetryPolicy(max_attempts=1), unique_key="k")
    queue.process_jobs(1)
    producer = drivers.connect(dsn, db_kind, autocommit=False)
    outcome: list[object] = []

    def retry() -> None:
        try:
            outcome.append(queue.retry(failed))
        except Exception as error:  # the test reports it, rather than a thread's traceback
            outcome.append(error)

    try:
        holder = queue.enqueue(Noop(), unique_key="k", connection=producer)  # not committed
        retrying = threading.Thread(target=retry)
        retrying.start()
        # The retry waits on the producer's uncommitted key (SQLite has one writer: no race).
        watcher = drivers.connect(dsn, db_kind, autocommit=True)
        try:
            wait_for("the retry to wait", lambda: lock_waits(watcher, db_kind) == 1)
        finally:
            watcher.close()
        producer.commit()
        retrying.join(timeout=30)
    finally:
        producer.close()
    assert outcome == [False]
    assert f"job {holder} holds" in why_not_retried(failed, queue.get(failed), queue)


@pytest.mark.databases("postgresql")
def test_enqueue_notifies_listeners_only_on_commit(queue: jobq.Queue, dsn: str) -> None:
    from jobq.backends.postgresql.controls import NOTIFY_CHANNEL

    with drivers.connect(dsn, "postgresql", autocommit=True) as listener:
        listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
        app = drivers.connect(dsn, "postgresql", autocommit=False)
        queue.enqueue(Noop(), type="dropped", connection=app)
        app.rollback()
        queue.enqueue(Noop(), type="kept", connection=app)
        app.commit()
        app.close()
        notes = list(listener.notifies(timeout=5, stop_after=1))
    assert [note.payload for note in notes] == ["kept"]


@pytest.mark.databases("postgresql")
def test_a_retry_a_release_and_a_recovery_wake_listeners(queue: jobq.Queue, dsn: str) -> None:
    """Each makes a job ready now, so each wakes idle workers as an enqueue does; a failure
    requeued for later wakes nobody, who would find nothing ready."""
    from jobq.backends.postgresql.controls import NOTIFY_CHANNEL

    again = jobq.RetryPolicy(max_attempts=5, backoff=0, jitter=False)
    later = jobq.RetryPolicy(max_attempts=5, backoff=3600, jitter=False)
    cancelled = queue.enqueue(Noop(), type="retried")
    assert queue.cancel(cancelled)
    queue.enqueue(Noop(), type="released")
    queue.enqueue(Noop(), type="recovered", retry=again)
    queue.enqueue(Noop(), type="backed-off", retry=later)
    with drivers.connect(dsn, "postgresql", autocommit=True) as listener:
        listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
        assert queue.retry(cancelled)
        released = queue.claim("released")
        assert released is not None
        assert queue.release([(released.id, released.token)]) == {released.id}
        backed_off = queue.claim("backed-off")
        assert backed_off is not None
        assert queue.fail(backed_off, "later")
        with jobq.Queue.connect(dsn, lease_duration=0.05) as short:
            assert short.claim("recovered") is not None
            wait_for("the lease to end", lambda: short.run_maintenance()["requeued"] == 1)
        notes = list(listener.notifies(timeout=5, stop_after=3))
    assert [note.payload for note in notes] == ["retried", "released", "recovered"]


class RetrySeen(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "event", None) == "db_retry":
            self.seen.set()


def test_a_lock_wait_timeout_is_retried(queue: jobq.Queue, dsn: str, db_kind: str) -> None:
    queue.enqueue(Noop())
    claim = queue.claim()
    assert claim is not None
    drivers.shorten_lock_waits(queue.connection, db_kind)
    retries = RetrySeen()
    logging.getLogger("jobq").addHandler(retries)
    locker = drivers.connect(dsn, db_kind, autocommit=True)
    outcome: list[object] = []
    try:
        drivers.lock_job_row(locker, db_kind, claim.id)
        worker = threading.Thread(target=lambda: outcome.append(queue.complete(claim)))
        worker.start()
        # Release the lock only once a try has timed out, so the retry is what succeeds.
        assert retries.seen.wait(timeout=30), "the blocked ack was never retried"
        locker.rollback()
        worker.join(timeout=30)
        assert not worker.is_alive()
    finally:
        logging.getLogger("jobq").removeHandler(retries)
        locker.close()
    assert outcome == [True]
    record = queue.get(claim.id)
    assert record is not None
    assert record.status is jobq.Status.COMPLETED


def test_other_database_errors_propagate(queue: jobq.Queue, dsn: str, db_kind: str) -> None:
    app = drivers.connect(dsn, db_kind, autocommit=True)
    try:
        with app.cursor() if db_kind != "sqlite" else _cursor(app) as cursor:
            cursor.execute("DROP TABLE jobq_jobs")
    finally:
        app.close()
    with pytest.raises(Exception, match="jobq_jobs"):
        queue.claim()


class _cursor:
    """sqlite3 cursors are not context managers."""

    def __init__(self, connection: Any) -> None:
        self.cursor = connection.cursor()

    def __enter__(self) -> Any:
        return self.cursor

    def __exit__(self, *exc: object) -> None:
        self.cursor.close()


ENQUEUES: dict[str, Callable[[jobq.Queue], Any]] = {
    "enqueue": lambda q: q.enqueue(Noop(), unique_key="taken"),
    "enqueue_many": lambda q: q.enqueue_many([Noop(), Noop()], unique_key=["free", "taken"]),
}


# As each driver reports a lock wait that timed out, unchanged.
LOCK_TIMEOUTS: dict[str, type[Exception]] = {
    "postgresql": psycopg.errors.LockNotAvailable,
    "mariadb": pymysql.err.OperationalError,
}


@contextmanager
def key_held_elsewhere(queue: jobq.Queue, dsn: str, db_kind: str) -> Iterator[RetrySeen]:
    """Another producer holds the unique key "taken", uncommitted, so an insert of it waits
    until its lock timeout; the retries jobq logs meanwhile are seen."""
    holder = drivers.connect(dsn, db_kind, autocommit=False)
    queue.enqueue(Noop(), unique_key="taken", connection=holder)
    retries = RetrySeen()
    logging.getLogger("jobq").addHandler(retries)
    try:
        yield retries
    finally:
        logging.getLogger("jobq").removeHandler(retries)
        holder.close()


def accounts(dsn: str, db_kind: str) -> Any:
    """An application's table with one account of balance 100; the connection it made."""
    app = drivers.connect(dsn, db_kind, autocommit=True)
    cursor = app.cursor()
    cursor.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)")
    cursor.execute("INSERT INTO accounts VALUES (1, 100)")
    cursor.close()
    return app


def balance(connection: Any) -> int:
    cursor = connection.cursor()
    cursor.execute("SELECT balance FROM accounts WHERE id = 1")
    (value,) = cursor.fetchone()
    cursor.close()
    return int(value)


@pytest.mark.databases("postgresql", "mariadb")
@pytest.mark.parametrize("how", sorted(ENQUEUES))
def test_a_lock_timeout_on_the_applications_connection_is_its_own_to_handle(
    queue: jobq.Queue, dsn: str, db_kind: str, how: str
) -> None:
    app = accounts(dsn, db_kind)
    drivers.shorten_lock_waits(app, db_kind)
    try:
        with key_held_elsewhere(queue, dsn, db_kind) as retries:
            drivers.begin(app, db_kind)
            cursor = app.cursor()
            cursor.execute("UPDATE accounts SET balance = balance - 30 WHERE id = 1")
            cursor.execute("SAVEPOINT before_enqueue")
            with pytest.raises(LOCK_TIMEOUTS[db_kind]) as raised:
                ENQUEUES[how](jobq.Queue.from_connection(app))
            assert queue.backend.is_transient(raised.value), raised.value
            # The application's own retry logic: its transaction is still whole.
            cursor.execute("ROLLBACK TO SAVEPOINT before_enqueue")
            cursor.close()
            app.commit()
            assert balance(app) == 70
            assert not retries.seen.is_set(), "jobq retried a transaction it does not own"
    finally:
        app.close()
    assert queue.counts() == {}


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize("how", sorted(ENQUEUES))
def test_a_stale_sqlite_snapshot_in_the_applications_transaction_is_not_retried(
    queue: jobq.Queue, dsn: str, how: str
) -> None:
    app = accounts(dsn, "sqlite")
    other = drivers.connect(dsn, "sqlite", autocommit=True)
    try:
        app.execute("BEGIN")
        read = balance(app)
        other.execute("UPDATE accounts SET balance = balance + 50 WHERE id = 1")
        # The application's transaction read 100 and may not write now (its snapshot is
        # stale). Rolled back and rerun by jobq, the application would write 100 - 30 next,
        # losing the other writer's 50.
        with pytest.raises(sqlite3.OperationalError) as raised:
            ENQUEUES[how](jobq.Queue.from_connection(app))
        assert queue.backend.is_transient(raised.value), raised.value
        assert app.in_transaction, "jobq ended the application's transaction"
        assert read == 100
        app.rollback()
    finally:
        other.close()
        app.close()
    assert queue.counts() == {}


@pytest.mark.databases("postgresql")
def test_a_deadlock_in_the_applications_transaction_reaches_it(
    queue: jobq.Queue, dsn: str, db_kind: str
) -> None:
    """The issue's case: two producers on one key, and the other one also writes the
    application's row. The database aborts the application's transaction; jobq must not
    enqueue again in a new one and return as if all was well. (On MariaDB the lock-timeout
    test above stands for it: which transaction InnoDB picks as the victim did not hold
    still enough for a test.)"""
    app = accounts(dsn, db_kind)
    other = drivers.connect(dsn, db_kind, autocommit=False)
    # The application's transaction must be the one aborted: the session whose
    # deadlock_timeout runs out first looks for the cycle and aborts itself, so the other
    # session looks late.
    other.execute("SET deadlock_timeout = '20s'")
    queue.enqueue(Noop(), unique_key="taken", connection=other)

    def other_writes_the_account() -> None:
        wait_for("the application to wait for the key", lambda: waiting(queue) == 1)
        cursor = other.cursor()
        cursor.execute("UPDATE accounts SET balance = balance + 50 WHERE id = 1")
        cursor.close()
        other.commit()

    writer = threading.Thread(target=other_writes_the_account)
    try:
        drivers.begin(app, db_kind)
        cursor = app.cursor()
        cursor.execute("UPDATE accounts SET balance = balance - 30 WHERE id = 1")
        cursor.close()
        writer.start()
        with pytest.raises(psycopg.errors.DeadlockDetected) as raised:
            jobq.Queue.from_connection(app).enqueue(Noop(), unique_key="taken")
        assert queue.backend.is_transient(raised.value), raised.value
        app.rollback()
        writer.join(timeout=30)
        assert not writer.is_alive()
        assert balance(app) == 150
    finally:
        other.close()
        app.close()
    assert queue.counts() == {"pending": 1}


def waiting(queue: jobq.Queue) -> int:
    """How many sessions wait for a lock."""
    sql = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
    (count,) = queue.backend.fetchone(sql)
    return int(count)
