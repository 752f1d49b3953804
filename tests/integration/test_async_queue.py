"""jobq.AsyncQueue on each database: the rows, reads and controls of the sync Queue, the
caller's own transaction, and wait() for a job another process finishes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from psycopg.pq import TransactionStatus

import jobq
from jobq.queue import waiting
from tests.support import async_drivers, drivers
from tests.support.jobs import Boom, Limited, Noop
from tests.support.paths import REPO
from tests.support.result_jobs import Answer

from .test_transactions import LOCK_TIMEOUTS, RetrySeen, key_held_elsewhere

pytestmark = pytest.mark.lease(60)


def run(dsn: str, scenario: Callable[[jobq.AsyncQueue], Awaitable[None]]) -> None:
    """Run a scenario on an AsyncQueue of the test's database, in a loop of its own."""

    async def main() -> None:
        async with await jobq.AsyncQueue.connect(dsn) as aqueue:
            await scenario(aqueue)

    asyncio.run(main())


def test_enqueued_rows_read_back_as_the_sync_queue_writes_and_reads_them(
    queue: jobq.Queue, dsn: str
) -> None:
    ids: list[int] = []

    async def scenario(aqueue: jobq.AsyncQueue) -> None:
        ids.append(await aqueue.enqueue(Noop(), priority=7, delay=60, unique_key="once"))
        assert await aqueue.enqueue(Noop(), unique_key="once") == ids[0]
        many = await aqueue.enqueue_many(
            [Noop(), Boom("b"), Noop(), Noop()], type="bulk", unique_key=[None, "k", "k", None]
        )
        assert many[1] == many[2], "a key repeated in the batch gives its first row's id"
        assert await aqueue.enqueue_many([]) == []
        for job_id in (ids[0], *many):
            assert await aqueue.get(job_id) == queue.get(job_id)
        assert await aqueue.get(10**9) is None

    run(dsn, scenario)
    # The sync queue writes the same row from the same arguments.
    twin = queue.enqueue(Noop(), priority=7, delay=60, unique_key="twin")
    ours, theirs = queue.get(ids[0]), queue.get(twin)
    assert ours is not None
    assert theirs is not None
    assert (ours.priority, ours.type, ours.unique_key) == (7, "noop", "once")
    assert ours.payload == theirs.payload
    assert queue.counts() == {"pending": 5}


BAD_CALLS: dict[str, Callable[[Any], Any]] = {
    "priority": lambda q: q.enqueue(Noop(), priority=5000),
    "delay and scheduled_at": lambda q: q.enqueue_many([Noop()], delay=1, scheduled_at=1),
    "unique keys": lambda q: q.enqueue_many([Noop()], unique_key=["a", "b"]),
    "not a job": lambda q: q.enqueue("job"),
    "status": lambda q: q.jobs(status="gone"),
    "type": lambda q: q.pause(""),
    "minutes": lambda q: q.completions_per_minute(0),
}


@pytest.mark.databases("sqlite")
def test_bad_input_raises_what_the_sync_queue_raises(queue: jobq.Queue, dsn: str) -> None:
    async def scenario(aqueue: jobq.AsyncQueue) -> None:
        for what, call in BAD_CALLS.items():
            with pytest.raises((TypeError, ValueError)) as sync_error:
                call(queue)
            with pytest.raises(type(sync_error.value)) as async_error:
                await call(aqueue)
            assert str(async_error.value) == str(sync_error.value), what

    run(dsn, scenario)


def test_a_limited_job_is_enqueued_with_its_limit_declared(queue: jobq.Queue, dsn: str) -> None:
    """AsyncQueue declares a job class's concurrency limit, with the statements Queue runs,
    before the rows: the jobs it writes are claimed within their limit."""

    async def scenario(aqueue: jobq.AsyncQueue) -> None:
        await aqueue.enqueue(Limited("a", 0))
        assert await aqueue.enqueue_many([Noop(), Limited("a", 1), Limited("a", 2)])
        await aqueue.enqueue(Limited("b", 3))

    run(dsn, scenario)
    assert [(row.type, row.declared, row.blocked) for row in queue.limits()] == [("limited", 2, 0)]
    claimed = queue.claim_many(10)
    keys = sorted(queue.waits_on(claim.id)[0] or "" for claim in claimed)
    assert keys == ["", "a", "a", "b"]
    assert [row.blocked for row in queue.limits()] == [1]


def test_enqueue_joins_the_callers_async_transaction(
    queue: jobq.Queue, dsn: str, db_kind: str
) -> None:
    async def scenario(aqueue: jobq.AsyncQueue) -> None:
        app = await async_drivers.connect(dsn, db_kind)
        try:
            await async_drivers.begin(app, db_kind)
            await aqueue.enqueue(Noop(), connection=app)
            await aqueue.enqueue_many([Noop(), Noop()], unique_key=["a", None], connection=app)
            await app.rollback()
            assert await aqueue.counts() == {}, "a rolled-back enqueue leaves no job"
            await async_drivers.begin(app, db_kind)
            kept = await aqueue.enqueue(Noop(), connection=app)
            many = await aqueue.enqueue_many([Noop(), Noop()], connection=app)
            assert await aqueue.get(kept) is None, "uncommitted jobs are invisible"
            await app.commit()
        finally:
            await async_drivers.close(app, db_kind)
        assert [record.id for record in await aqueue.jobs()] == [*reversed(many), kept]

    run(dsn, scenario)


ENQUEUES: dict[str, Callable[[jobq.AsyncQueue, Any], Awaitable[Any]]] = {
    "enqueue": lambda q, app: q.enqueue(Noop(), unique_key="taken", connection=app),
    "enqueue_many": lambda q, app: q.enqueue_many(
        [Noop(), Noop()], unique_key=[None, "taken"], connection=app
    ),
}


@pytest.mark.databases("postgresql", "mariadb")
@pytest.mark.parametrize("how", sorted(ENQUEUES))
def test_a_lock_timeout_on_the_callers_connection_reaches_it_unchanged(
    queue: jobq.Queue, dsn: str, db_kind: str, how: str
) -> None:
    async def scenario(aqueue: jobq.AsyncQueue, retries: RetrySeen) -> None:
        app = await async_drivers.connect(dsn, db_kind)
        try:
            await async_drivers.execute(app, drivers.SHORT_LOCK_WAITS[db_kind])
            await async_drivers.begin(app, db_kind)
            kept = await aqueue.enqueue(Noop(), type="kept", connection=app)
            await async_drivers.execute(app, "SAVEPOINT before_enqueue")
            with pytest.raises(LOCK_TIMEOUTS[db_kind]) as raised:
                await ENQUEUES[how](aqueue, app)
            assert queue.backend.is_transient(raised.value), raised.value
            if db_kind == "postgresql":
                # Left as the error left it: no savepoint of jobq's was rolled back.
                assert app.info.transaction_status == TransactionStatus.INERROR
            # The caller's own retry logic: its transaction is still whole.
            await async_drivers.execute(app, "ROLLBACK TO SAVEPOINT before_enqueue")
            await app.commit()
        finally:
            await async_drivers.close(app, db_kind)
        assert not retries.seen.is_set(), "jobq retried a transaction it does not own"
        record = await aqueue.get(kept)
        assert record is not None
        assert record.type == "kept"

    with key_held_elsewhere(queue, dsn, db_kind) as retries:
        run(dsn, lambda aqueue: scenario(aqueue, retries))


def test_reads_and_controls_answer_as_the_sync_queues(queue: jobq.Queue, dsn: str) -> None:
    failed = queue.enqueue(Boom(), retry=jobq.RetryPolicy(max_attempts=1))
    queue.process_jobs(1)
    done = queue.enqueue(Noop())
    queue.process_jobs(1)
    waiting = queue.enqueue_many([Noop(), Noop()], type="later", unique_key=["held", None])

    async def scenario(aqueue: jobq.AsyncQueue) -> None:
        assert await aqueue.jobs() == queue.jobs()
        assert await aqueue.jobs("pending", "later", 1) == queue.jobs("pending", "later", 1)
        assert await aqueue.jobs(type="later", before_id=waiting[1]) == queue.jobs(
            type="later", before_id=waiting[1]
        )
        assert await aqueue.counts() == queue.counts()
        assert await aqueue.counts("later") == {"pending": 2}
        assert await aqueue.counts_by_type() == queue.counts_by_type()
        assert await aqueue.recent_counts_by_type(5) == queue.recent_counts_by_type(5)
        assert await aqueue.completions_per_minute(3) == queue.completions_per_minute(3)
        assert set(await aqueue.oldest_ready()) == {"later"}
        assert await aqueue.unique_holder("held") == waiting[0]
        assert await aqueue.knows_type("later") is True
        assert await aqueue.knows_type("never-seen") is False

        assert await aqueue.pause("later") is True
        assert await aqueue.pause("later") is False
        assert await aqueue.paused() == queue.paused() == {"later"}
        assert await aqueue.resume("later") is True
        assert await aqueue.paused() == set()

        assert await aqueue.cancel(waiting[1]) is True
        assert await aqueue.cancel(done) is False
        assert await aqueue.cancel(-1) is False
        assert await aqueue.retry(failed) is True
        assert await aqueue.retry(done) is False
        assert await aqueue.retry(True) is False

    run(dsn, scenario)
    statuses = {job_id: queue.get(job_id).status for job_id in (failed, waiting[1])}  # type: ignore[union-attr]
    assert statuses == {failed: "pending", waiting[1]: "cancelled"}


def test_a_dependent_retried_by_the_async_queue_waits_for_its_parent(
    queue: jobq.Queue, dsn: str
) -> None:
    parent = queue.enqueue(Noop())
    child = queue.enqueue(Noop(), after=[parent])
    assert queue.cancel(child)

    async def scenario(aqueue: jobq.AsyncQueue) -> None:
        assert await aqueue.retry(child) is True

    run(dsn, scenario)
    record = queue.get(child)
    assert record is not None
    assert record.status == "waiting"


# Runs the job in a process of its own, as a worker would: its completion stores the result
# and, on PostgreSQL, announces the job's end to the waiters the trigger knows of.
FINISHER = """
import sys, jobq, tests.support.result_jobs
with jobq.Queue.connect(sys.argv[1]) as queue:
    assert queue.process_jobs(1) == 1
"""
ANSWER = {"ünïcode": ["nested", {"n": 1.5, "none": None}]}


async def waited(aqueue: jobq.AsyncQueue, job_id: int, dsn: str) -> jobq.JobRecord:
    """wait() for a job that another process finishes once the waiter has seen it pending."""
    seen_pending = asyncio.Event()
    read = aqueue.get

    async def get(job_id: int) -> jobq.JobRecord | None:
        record = await read(job_id)
        if record is not None and record.status == "pending":
            seen_pending.set()
        return record

    aqueue.get = get  # type: ignore[method-assign]
    waiter = asyncio.create_task(aqueue.wait(job_id, timeout=60))
    await asyncio.wait_for(seen_pending.wait(), 30)
    finisher = [sys.executable, "-c", FINISHER, dsn]
    await asyncio.to_thread(subprocess.run, finisher, cwd=REPO, check=True, timeout=60)
    return await waiter


def finished_while_waiting(queue: jobq.Queue, dsn: str) -> None:
    job_id = queue.enqueue(Answer(ANSWER))

    async def scenario(aqueue: jobq.AsyncQueue) -> None:
        record = await waited(aqueue, job_id, dsn)
        assert (record.id, record.status, record.result) == (job_id, "completed", ANSWER)
        # The record Queue reads, with the results' fields, decoded alike.
        assert record == queue.get(job_id)
        assert [entry.attempt for entry in record.history] == [1]
        assert record.started_at is not None

    run(dsn, scenario)


@pytest.mark.databases("postgresql")
def test_wait_wakes_on_the_notify_of_a_job_another_process_finished(
    queue: jobq.Queue, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Told by NOTIFY, the waiter would not read the row again within the test's bounds: only
    # the wake-up can end its wait in time.
    monkeypatch.setattr(waiting, "NOTIFIED_POLL", 600.0)
    finished_while_waiting(queue, dsn)


@pytest.mark.databases("mariadb", "sqlite")
def test_wait_polls_for_a_job_another_process_finished(queue: jobq.Queue, dsn: str) -> None:
    finished_while_waiting(queue, dsn)


def test_wait_times_out_on_a_job_still_pending(queue: jobq.Queue, dsn: str) -> None:
    job_id = queue.enqueue(Noop())

    async def scenario(aqueue: jobq.AsyncQueue) -> None:
        with pytest.raises(TimeoutError, match=f"job {job_id} is still pending"):
            await aqueue.wait(job_id, timeout=0.3)
        with pytest.raises(LookupError, match="no job with id"):
            await aqueue.wait(10**9, timeout=5)
        for bad in (-1, float("nan"), True, "1"):
            with pytest.raises(ValueError, match="timeout must be"):
                await aqueue.wait(job_id, timeout=bad)  # type: ignore[arg-type]
        assert await aqueue.cancel(job_id) is True
        record = await aqueue.wait(job_id, timeout=0)
        assert record.status == "cancelled"

    run(dsn, scenario)


def test_enqueue_after_waits_for_the_parents(dsn: str, queue: jobq.Queue) -> None:
    parent = queue.enqueue(Noop())

    async def scenario(aqueue: jobq.AsyncQueue) -> None:
        child = await aqueue.enqueue(Noop(), after=[parent])
        assert await aqueue.enqueue_many([Noop()], after=[parent, child]) == [child + 1]

    run(dsn, scenario)
    assert queue.counts() == {"pending": 1, "waiting": 2}
    assert queue.process_jobs(3) == 3
