"""Transaction rules: consumers need autocommit, producers may enqueue inside a transaction,
and statements the database aborts transiently are retried."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest

import jobq
from tests.support import drivers
from tests.support.jobs import Noop

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
    assert claim is not None and claim.id == kept


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
    assert record is not None and record.status is jobq.Status.COMPLETED


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
