"""PostgreSQL's limit triggers under interleavings replayed step by step with explicit
transactions: an ending wakes a blocked job even while a concurrent claim holds that job's
row lock, and endings that free several keys at once never deadlock with one another."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator

import psycopg
import pytest

import jobq
from jobq.backends.postgresql.limits import KEY_LOCK_CLASS
from jobq.backends.rows import Runner
from jobq.records import ClaimedJob
from tests.support.jobs import Limited, Rated
from tests.support.waiting import wait_for

pytestmark = pytest.mark.databases("postgresql")


@pytest.fixture
def other(dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(dsn) as connection:
        yield connection


def waiting_on_a_lock(queue: jobq.Queue, pid: int) -> bool:
    """Whether the server process `pid` waits for a lock now."""
    row = queue.backend.fetchone(
        "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %(pid)s",
        {"pid": pid},
    )
    return bool(row and row[0])


def test_an_ending_wakes_a_job_a_failed_recheck_holds(
    queue: jobq.Queue, dsn: str, other: psycopg.Connection[tuple[object, ...]]
) -> None:
    """A claim whose snapshot predates a job's block reaches its row after the blocking claim
    committed: READ COMMITTED locks the row's new version, finds it no longer ready and steps
    over it, yet keeps the lock until it commits. An ending of the key meanwhile must not
    skip that row for good: it waits for it, and the job is woken."""
    queue.set_limit("limited", 1)
    running = queue.enqueue(Limited("a", 0))
    later = queue.enqueue(Limited("a", 1))
    held = queue.claim()
    assert held is not None
    assert held.id == running
    # The concurrent claim's probe: its snapshot is the cursor's, taken before the block.
    other.execute(
        "DECLARE probe CURSOR FOR SELECT id FROM jobq_jobs WHERE status = 'pending' "
        "AND blocked_on IS NULL ORDER BY id FOR UPDATE SKIP LOCKED"
    )
    assert queue.claim() is None
    assert [job.id for job in queue.blocked()] == [later]
    assert other.execute("FETCH 1 FROM probe").fetchall() == []

    ending = threading.Thread(target=queue.complete, args=(held,))
    pid = queue.backend.connection.info.backend_pid
    with jobq.Queue.connect(dsn) as watcher:
        ending.start()
        wait_for(
            "the ending to wait for the row or to finish",
            lambda: not ending.is_alive() or waiting_on_a_lock(watcher, pid),
        )
    other.commit()
    ending.join(15)
    assert not ending.is_alive()
    assert queue.blocked() == []
    claim = queue.claim()
    assert claim is not None
    assert claim.id == later


@pytest.mark.parametrize("job", [Limited("a"), Rated("a")], ids=["concurrency", "rate"])
def test_a_claim_leaves_a_job_whose_key_another_transaction_holds_ready(
    queue: jobq.Queue, other: psycopg.Connection[tuple[object, ...]], job: jobq.Job
) -> None:
    """A key is held by an advisory lock on the hash of its type and key (no row of
    jobq_limit_keys is written, nor needed): a claim meeting a key held elsewhere leaves
    its job ready, uncounted, for a later claim."""
    ready = queue.enqueue(job)
    other.execute(
        "SELECT pg_advisory_xact_lock(%s, hashtext(%s || chr(31) || %s))",
        (KEY_LOCK_CLASS, job.type, "a"),
    )
    assert queue.claim() is None
    assert queue.blocked() == []
    other.rollback()
    claim = queue.claim()
    assert claim is not None
    assert (claim.id, claim.attempt) == (ready, 1)
    assert queue.backend.fetchone("SELECT count(*) FROM jobq_limit_keys") == (0,)


HERE = Runner("here", 1, "w1")


def fused(batched: bool) -> Callable[[jobq.Queue, list[ClaimedJob]], object]:
    """An acknowledgement fused with the next claim, as a worker sends it."""

    def single(queue: jobq.Queue, ended: list[ClaimedJob]) -> object:
        (done,) = ended
        return queue.backend.complete_and_claim(done.id, done.token, (), "next", 60.0, HERE)

    def many(queue: jobq.Queue, ended: list[ClaimedJob]) -> object:
        done = [(claim.id, claim.token, None, 0.0, 0.0) for claim in ended]
        return queue.backend.complete_many_and_claim(done, (), ["next"], 60.0, HERE)

    return many if batched else single


def released(queue: jobq.Queue, ended: list[ClaimedJob]) -> object:
    """Prefetched attempts given back unstarted, in the order the worker lists them."""
    return queue.backend.release([(claim.id, claim.token) for claim in ended])


@pytest.mark.parametrize(
    ("first", "second", "second_ends", "second_waits"),
    [
        (fused(False), fused(False), "b", True),
        (fused(True), fused(True), "b", False),
        (fused(False), released, "ab", True),
    ],
    ids=["single", "batched", "release"],
)
def test_endings_of_crossed_keys_never_deadlock(
    queue: jobq.Queue,
    dsn: str,
    other: psycopg.Connection[tuple[object, ...]],
    first: Callable[[jobq.Queue, list[ClaimedJob]], object],
    second: Callable[[jobq.Queue, list[ClaimedJob]], object],
    second_ends: str,
    second_waits: bool,
) -> None:
    """The first statement acknowledges an attempt of key a and claims a job of key b; it is
    held at its acknowledgement, its claim made. The second ends attempts of b (after one of
    a, for the release) and claims a job of a. Unless each takes the keys of the attempts it
    ends before it claims, in one order, each waits for a key the other holds.

    A batched acknowledgement claims only once its completions are made (it may take the
    next job of each of their keys: claims.SUCCESSORS), so the first holds key a and has
    claimed nothing: the second ends b and, finding a held, claims nothing of a, and never
    waits."""
    ids = [queue.enqueue(Limited(key, 1)) for key in "ab"]
    claims = {claim.id: claim for claim in queue.claim_many(2)}
    ending = {"a": claims[ids[0]], "b": claims[ids[1]]}
    queue.enqueue(Limited("a", 2))
    (ending["a2"],) = queue.claim_many(1)
    queue.enqueue(Limited("b", 2))
    # The first statement's acknowledgement waits for this lock; its claim has run.
    other.execute("SELECT FROM jobq_jobs WHERE id = %s FOR UPDATE", (ids[0],))
    errors: list[BaseException] = []
    pids: list[int] = []

    def end(action: Callable[[jobq.Queue, list[ClaimedJob]], object], keys: list[str]) -> None:
        try:
            with jobq.Queue.connect(dsn) as mine:
                pids.append(mine.backend.connection.info.backend_pid)
                action(mine, [ending[key] for key in keys])
        except BaseException as error:
            errors.append(error)

    threads = [
        threading.Thread(target=end, args=(first, ["a"])),
        threading.Thread(target=end, args=(second, ["a2", "b"] if second_ends == "ab" else ["b"])),
    ]
    with jobq.Queue.connect(dsn) as watcher:

        def waits(place: int) -> bool:
            return len(pids) > place and waiting_on_a_lock(watcher, pids[place])

        for place, thread in enumerate(threads):
            thread.start()
            if place == 1 and not second_waits:
                thread.join(15)
                assert not thread.is_alive(), "the second statement waits for the first"
            else:
                what = f"statement {place + 1} to wait for a lock"
                wait_for(what, functools.partial(waits, place))
            queue.enqueue(Limited("a", 3))
    other.commit()
    for thread in threads:
        thread.join(15)
    assert not errors
    first_ended = queue.get(ids[0])
    assert first_ended is not None
    assert first_ended.status == "completed"
