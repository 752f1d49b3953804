"""enqueue_many: many jobs in a few statements, checked as enqueue checks one, returned in the
order given, and all or none of them with the transaction they were written in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import jobq
from jobq.queue.new_jobs import MAX_PAYLOAD_BYTES
from tests.support import drivers
from tests.support.jobs import Noop, Record

pytestmark = pytest.mark.lease(60)


@pytest.fixture(autouse=True)
def fresh_record() -> None:
    Record.seen = []


def payload_of(queue: jobq.Queue, job_id: int) -> str:
    record = queue.get(job_id)
    assert record is not None
    return record.payload


@pytest.mark.parametrize("chunk_rows", [1000, 7], ids=["one chunk", "several chunks"])
def test_ids_come_back_in_the_order_given(
    queue: jobq.Queue, chunk_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue.backend, "chunk_rows", chunk_rows)
    ids = queue.enqueue_many([Record(i) for i in range(50)])
    assert len(set(ids)) == 50
    assert [payload_of(queue, job_id) for job_id in ids] == [
        queue.codec.encode(Record(i))[1] for i in range(50)
    ]
    while queue.process_next():
        pass
    assert Record.seen == list(range(50))


def test_nothing_is_a_list_of_nothing(queue: jobq.Queue) -> None:
    assert queue.enqueue_many([]) == []
    assert queue.counts() == {}


def test_options_apply_to_every_job(queue: jobq.Queue) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    deadline = later + timedelta(hours=1)
    policy = jobq.RetryPolicy(max_attempts=7)
    ids = queue.enqueue_many(
        [Noop(), Record(1)], type="batch", scheduled_at=later, deadline=deadline, retry=policy
    )
    for job_id in ids:
        record = queue.get(job_id)
        assert record is not None
        assert (record.type, record.retry, record.status) == ("batch", policy, "pending")
        assert abs(record.scheduled_at - later) < timedelta(milliseconds=1)
        assert record.deadline is not None
        assert abs(record.deadline - deadline) < timedelta(milliseconds=1)
    assert queue.claim() is None  # not due for an hour

    delayed = queue.enqueue_many([Noop(), Noop()], delay=3600, deadline=7200)
    for job_id in delayed:
        record = queue.get(job_id)
        assert record is not None and record.deadline is not None
        assert record.scheduled_at > datetime.now(UTC) + timedelta(minutes=59)
        assert record.deadline > record.scheduled_at
    assert queue.claim() is None


@pytest.mark.parametrize(
    ("jobs", "options", "error", "message"),
    [
        ([Noop(), "not a job"], {}, TypeError, "can only enqueue jobq.Job"),
        ([Noop()], {"type": ""}, ValueError, "job type"),
        ([Noop()], {"delay": -1}, ValueError, "delay"),
        ([Noop()], {"delay": 1, "scheduled_at": datetime.now(UTC)}, ValueError, "not both"),
        ([Noop()], {"deadline": datetime(2030, 1, 1)}, ValueError, "timezone-aware"),
        ([Noop()], {"retry": 3}, TypeError, "retry must be a jobq.RetryPolicy"),
        ([Noop(), Record("x" * MAX_PAYLOAD_BYTES)], {}, ValueError, "over jobq's limit"),
    ],
)
def test_bad_input_is_refused_before_any_job_is_written(
    queue: jobq.Queue,
    jobs: list[object],
    options: dict[str, object],
    error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error, match=message):
        queue.enqueue_many(jobs, **options)  # type: ignore[arg-type]
    assert queue.counts() == {}


@pytest.mark.parametrize("chunk_rows", [1000, 7], ids=["one chunk", "several chunks"])
def test_a_rollback_of_the_producers_transaction_drops_them_all(
    queue: jobq.Queue, dsn: str, db_kind: str, chunk_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue.backend, "chunk_rows", chunk_rows)
    app = drivers.connect(dsn, db_kind, autocommit=False)
    try:
        queue.enqueue_many([Noop() for _ in range(30)], connection=app)
        app.rollback()
        assert queue.counts() == {}
        kept = queue.enqueue_many([Noop() for _ in range(30)], connection=app)
        assert queue.counts() == {}  # not committed yet
        app.commit()
    finally:
        app.close()
    assert queue.counts() == {"pending": 30}
    assert all(queue.get(job_id) is not None for job_id in kept)


@pytest.mark.databases("postgresql")
def test_one_wake_up_per_type_on_commit(
    queue: jobq.Queue, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobq.backends.postgresql.controls import NOTIFY_CHANNEL

    monkeypatch.setattr(queue.backend, "chunk_rows", 7)
    with drivers.connect(dsn, "postgresql", autocommit=True) as listener:
        listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
        app = drivers.connect(dsn, "postgresql", autocommit=False)
        queue.enqueue_many([Noop() for _ in range(20)], type="dropped", connection=app)
        app.rollback()
        jobs = [Noop() for _ in range(20)]
        queue.enqueue_many(jobs, type="a", connection=app)
        queue.enqueue_many(jobs, type="b", connection=app)
        app.commit()
        app.close()
        queue.enqueue_many(jobs, type="c")
        notes = list(listener.notifies(timeout=2, stop_after=4))
    assert sorted(note.payload for note in notes) == ["a", "b", "c"]


def test_on_an_autocommit_connection_they_are_written_and_committed(
    queue: jobq.Queue, dsn: str, db_kind: str
) -> None:
    app = drivers.connect(dsn, db_kind, autocommit=True)
    try:
        ids = queue.enqueue_many([Record(i) for i in range(40)], type="auto", connection=app)
    finally:
        app.close()
    assert queue.counts() == {"pending": 40}
    assert [payload_of(queue, job_id) for job_id in ids] == [
        queue.codec.encode(Record(i))[1] for i in range(40)
    ]


def test_each_job_is_due_from_the_moment_its_transaction_wrote_it(queue: jobq.Queue) -> None:
    # The same moment enqueue() uses: the database's now, not the client's clock.
    ids = queue.enqueue_many([Noop(), Noop()], deadline=60)
    ids += queue.enqueue_many([Noop()])
    for job_id in ids:
        record = queue.get(job_id)
        assert record is not None
        assert record.scheduled_at == record.created_at
    first = queue.get(ids[0])
    assert first is not None and first.deadline == first.created_at + timedelta(seconds=60)


def test_retry_settings_given_as_integers_are_stored_as_given(queue: jobq.Queue) -> None:
    policy = jobq.RetryPolicy(max_attempts=4, backoff=2, max_backoff=60, jitter=False)
    [job_id] = queue.enqueue_many([Noop()], retry=policy)
    record = queue.get(job_id)
    assert record is not None and record.retry == policy
