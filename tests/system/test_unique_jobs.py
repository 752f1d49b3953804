"""enqueue(unique_key=...): while a job with the key is pending or in progress, enqueueing
another returns its id and adds nothing; the database's unique index decides, so concurrent
producers, in transactions of their own too, never make two active jobs with one key."""

from __future__ import annotations

import multiprocessing
import os
from typing import Any

import pymysql
import pytest

import jobq
from tests.support import drivers
from tests.support.jobs import Boom, Noop, Record

ACTIVE = ("pending", "in_progress")
DEADLOCK = 1213


pytestmark = pytest.mark.lease(60)


def active_with(queue: jobq.Queue, key: str) -> list[int]:
    rows = queue.backend.fetchall(
        "SELECT id, status FROM jobq_jobs WHERE unique_key = "
        + queue.backend.placeholder.format("k"),
        {"k": key},
    )
    return [int(row[0]) for row in rows if row[1] in ACTIVE]


def test_a_key_held_by_an_active_job_returns_that_job(queue: jobq.Queue) -> None:
    first = queue.enqueue(Record(1), unique_key="import:customer-42")
    assert queue.enqueue(Record(2), unique_key="import:customer-42") == first
    other = queue.enqueue(Record(3), unique_key="import:customer-43")
    assert other != first
    record = queue.get(first)
    assert record is not None
    assert record.unique_key == "import:customer-42"
    assert queue.counts() == {"pending": 2}


def test_keys_are_compared_exactly(queue: jobq.Queue) -> None:
    keys = ["k", "K", "k ", "ké", "ke\u0301"]
    ids = [queue.enqueue(Noop(), unique_key=key) for key in keys]
    assert len(set(ids)) == len(keys)


def test_the_key_is_held_while_running_and_while_waiting_for_a_retry(queue: jobq.Queue) -> None:
    first = queue.enqueue(Boom(), unique_key="k", retry=jobq.RetryPolicy(max_attempts=2))
    claim = queue.claim()
    assert claim is not None
    assert claim.id == first
    assert queue.enqueue(Noop(), unique_key="k") == first  # in progress
    assert queue.run(claim) is jobq.Outcome.RETRIED
    assert queue.enqueue(Noop(), unique_key="k") == first  # pending, for its retry


@pytest.mark.parametrize("finish", ["completed", "failed"])
def test_a_finished_job_frees_its_key(queue: jobq.Queue, finish: str) -> None:
    once = jobq.RetryPolicy(max_attempts=1)
    first = queue.enqueue(Boom() if finish == "failed" else Noop(), unique_key="k", retry=once)
    claim = queue.claim()
    assert claim is not None
    queue.run(claim)
    assert queue.get(first).status == finish  # type: ignore[union-attr]
    second = queue.enqueue(Noop(), unique_key="k")
    assert second != first
    assert active_with(queue, "k") == [second]


def test_enqueue_many_takes_a_key_per_job_or_a_function(queue: jobq.Queue) -> None:
    held = queue.enqueue(Record(0), unique_key="a")
    ids = queue.enqueue_many(
        [Record(1), Record(2), Record(3), Record(4)], unique_key=["a", None, "b", "b"]
    )
    assert ids[0] == held
    assert ids[2] == ids[3]
    assert len({held, ids[1], ids[2]}) == 3

    def parity(job: jobq.Job) -> str:
        assert isinstance(job, Record)
        assert isinstance(job.value, int)
        return f"b{job.value % 2}"

    again = queue.enqueue_many([Record(5), Record(6)], unique_key=parity)
    assert queue.counts() == {"pending": 5}
    assert again == queue.enqueue_many([Record(7), Record(8)], unique_key=["b1", "b0"])


def test_a_key_in_a_rolled_back_transaction_is_not_held(
    queue: jobq.Queue, dsn: str, db_kind: str
) -> None:
    app = drivers.connect(dsn, db_kind, autocommit=True)
    try:
        drivers.begin(app, db_kind)
        queue.enqueue(Noop(), unique_key="k", connection=app)
        # A taken key inside the transaction is no error, and the transaction goes on.
        first = queue.enqueue(Noop(), unique_key="k", connection=app)
        assert queue.enqueue(Noop(), unique_key="k", connection=app) == first
        app.rollback()
    finally:
        app.close()
    assert active_with(queue, "k") == []
    again = queue.enqueue(Noop(), unique_key="k")
    assert active_with(queue, "k") == [again]


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("x" * 256, "256 characters long, over jobq's limit of 255"),
        ("", "non-empty string"),
        ("a\x00b", "without NUL bytes"),
        ("\udc80", "lone surrogates"),
        (42, "non-empty string or None"),
    ],
)
def test_a_key_the_column_cannot_hold_is_refused(queue: jobq.Queue, key: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        queue.enqueue(Noop(), unique_key=key)
    assert queue.counts() == {}


def test_the_longest_key_fits(queue: jobq.Queue) -> None:
    key = "é" * 254 + "\U0001f600"  # 255 characters, the last of four bytes
    first = queue.enqueue(Noop(), unique_key=key)
    assert queue.enqueue(Noop(), unique_key=key) == first
    assert queue.get(first).unique_key == key  # type: ignore[union-attr]


def producer(dsn: str, db_kind: str, how: str, start: Any, results: Any) -> None:
    """One of the racing producers: on the queue's own connection, or inside a transaction
    of its own that it then commits or rolls back."""
    os.environ.pop("JOBQ_DSN", None)
    queue = jobq.Queue.connect(dsn)
    app = drivers.connect(dsn, db_kind, autocommit=True)
    try:
        if how == "own":
            start.wait(30)
            results.put((how, queue.enqueue(Noop(), unique_key="race")))
            return
        # SQLite's BEGIN IMMEDIATE takes the database's one write lock at once: there the
        # transaction can only begin once all are released.
        if db_kind != "sqlite":
            drivers.begin(app, db_kind)
        start.wait(30)
        if db_kind == "sqlite":
            drivers.begin(app, db_kind)
        try:
            job_id = queue.enqueue(Noop(), unique_key="race", connection=app)
        except pymysql.err.OperationalError as error:
            # InnoDB's locks on a duplicate key can deadlock racing inserts; the victim's
            # whole transaction is rolled back, as for any deadlock.
            if error.args[0] != DEADLOCK:
                raise
            results.put(("deadlock", None))
            return
        if how == "commit":
            app.commit()
        else:
            app.rollback()
        results.put((how, job_id))
    finally:
        app.close()
        queue.close()


def test_eight_producers_at_once_make_one_active_job(
    queue: jobq.Queue, dsn: str, db_kind: str
) -> None:
    context = multiprocessing.get_context("fork")
    start = context.Barrier(8)
    results = context.Queue()
    hows = ["own", "own", "commit", "commit", "rollback", "rollback", "rollback", "own"]
    processes = [
        context.Process(target=producer, args=(dsn, db_kind, how, start, results)) for how in hows
    ]
    for process in processes:
        process.start()
    found = [results.get(timeout=60) for _ in processes]
    for process in processes:
        process.join(timeout=30)
        assert process.exitcode == 0
    active = active_with(queue, "race")
    assert len(active) == 1
    # Everyone whose enqueue stayed was given the one active job.
    assert {job_id for how, job_id in found if how in ("own", "commit")} == set(active)
