"""A concurrency limit holds in the claim on every database: a key never has more attempts
in progress than its limit, a full key's jobs wait out of the way of other keys (even at a
higher priority), and a slot comes back whenever its attempt ends, or its lease does."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

import jobq
from jobq.backends.limits import REFUSALS
from jobq.backends.mysql import MysqlBackend
from jobq.limits import CONCURRENCY
from jobq.supervisor.housekeeper import depth
from jobq.supervisor.metrics import QueueDepth
from tests.support.jobs import Limited, Noop
from tests.support.waiting import wait_lease_ended


def running_by_key(queue: jobq.Queue) -> Counter[str]:
    claims = queue.backend.fetchall(
        "SELECT limit_key FROM jobq_jobs WHERE status = 'in_progress' AND limit_key IS NOT NULL"
    )
    return Counter(row[0] for row in claims)


def test_a_full_key_lets_other_keys_by_and_wakes_when_a_slot_frees(queue: jobq.Queue) -> None:
    high = [queue.enqueue(Limited("a", i), priority=5) for i in range(5)]
    others = [queue.enqueue(Limited("b", i)) for i in range(2)]
    plain = queue.enqueue(Noop())

    first = queue.claim_many(10)
    assert running_by_key(queue) == {"a": 2, "b": 2}
    assert {c.id for c in first} == {*high[:2], *others, plain}
    assert queue.waits_on(high[2]) == ("a", CONCURRENCY)
    assert [(r.type, r.in_force, r.in_use, r.blocked) for r in queue.limits()] == [
        ("limited", 2, 4, 3)
    ]
    assert [b.id for b in queue.blocked()] == high[:1:-1]
    # What the supervisor's metrics show: per type and limit, never per key.
    figures = QueueDepth()
    figures.update([], {}, 0.0, limits=depth(queue).limits)
    samples = {
        (sample.name, tuple(sample.labels.values())): sample.value
        for family in figures.collect_limits()
        for sample in family.samples
    }
    assert samples == {
        ("jobq_limit_slots_in_use", ("limited", CONCURRENCY)): 4,
        ("jobq_jobs_blocked", ("limited",)): 3,
    }
    assert queue.claim() is None

    done = next(c for c in first if c.id == high[0])
    assert queue.complete(done)
    (next_one,) = queue.claim_many(10)
    assert next_one.id == high[2]
    assert running_by_key(queue)["a"] == 2


def test_one_claim_goes_past_a_full_key_s_jobs_enqueued_together(queue: jobq.Queue) -> None:
    # More refused jobs ahead than one probe round looks past: the claim goes on at once
    # rather than reporting nothing ready and sending its worker to wait.
    for i in range(2 + 3 * REFUSALS):
        queue.enqueue(Limited("a", i))
    behind = queue.enqueue(Limited("b"))
    assert len(queue.claim_many(2)) == 2
    claim = queue.claim()
    assert claim is not None
    assert claim.id == behind
    assert [r.blocked for r in queue.limits()] == [3 * REFUSALS]


def test_a_batched_claim_goes_past_a_full_key_s_jobs_enqueued_together(queue: jobq.Queue) -> None:
    # Each batch meets only refused jobs: as claim() does, it goes on at once rather than
    # come back empty and send a prefetching worker to wait for work.
    for i in range(2 + 3 * REFUSALS):
        queue.enqueue(Limited("a", i))
    behind = queue.enqueue(Limited("b"))
    assert len(queue.claim_many(2)) == 2
    assert [claim.id for claim in queue.claim_many(REFUSALS)] == [behind]
    assert [r.blocked for r in queue.limits()] == [3 * REFUSALS]


def test_a_batched_claim_counts_the_rows_a_limit_refused(queue: jobq.Queue) -> None:
    # The adaptive prefetch counts them with the claimed ones: the backlog was deep.
    for i in range(5):
        queue.enqueue(Limited("a", i))
    plain = queue.enqueue(Noop())
    claims = queue.claim_many(5)
    assert (len(claims), claims.refused, claims.picked) == (2, 3, 5)
    unlimited = queue.claim_many(4)
    assert ([claim.id for claim in unlimited], unlimited.refused) == ([plain], 0)


def test_an_acknowledgement_fused_with_a_batched_claim_counts_the_rows_a_limit_refused(
    queue: jobq.Queue,
) -> None:
    # The path a prefetching worker takes for nearly every claim.
    queue.set_limit("limited", 1)
    queue.enqueue(Limited("a"))
    other = queue.enqueue(Limited("b"))
    first = queue.claim_many(2)
    for i in range(3):
        queue.enqueue(Limited("a", i))
    done = next(claim for claim in first if claim.id == other)
    _, claims = queue.complete_many_and_claim([done], 3)
    assert (len(claims), claims.refused) == (0, 3)


@pytest.mark.databases("postgresql")
def test_a_claim_that_fills_its_key_blocks_the_key_s_other_ready_jobs(queue: jobq.Queue) -> None:
    # On PostgreSQL, at once, in the claim's transaction: no later probe meets them one by
    # one. A job of the key due later stays out of it, and so do other keys.
    queue.set_limit("limited", 1)
    first, *rest = [queue.enqueue(Limited("a", i)) for i in range(4)]
    later = queue.enqueue(Limited("a", 9), delay=3600)
    other = queue.enqueue(Limited("b"))
    claim = queue.claim()
    assert claim is not None
    assert claim.id == first
    assert sorted(job.id for job in queue.blocked()) == rest
    assert queue.complete(claim)
    woken = queue.claim()
    assert woken is not None
    assert woken.id == rest[0]
    assert sorted(job.id for job in queue.blocked()) == rest[1:]
    assert queue.waits_on(later) == ("a", None)
    assert queue.waits_on(other) == ("b", None)


def test_enqueue_many_writes_a_key_s_jobs_beyond_its_limit_blocked(queue: jobq.Queue) -> None:
    # Behind the key's first two, written in the same transaction: the claims never meet
    # them, and each ending of those wakes the next, best first.
    *a, b = queue.enqueue_many([*(Limited("a", i) for i in range(5)), Limited("b")])
    assert sorted(job.id for job in queue.blocked()) == a[2:]
    assert queue.waits_on(a[2]) == ("a", CONCURRENCY)
    first = queue.claim_many(10)
    assert sorted(claim.id for claim in first) == [*a[:2], b]
    done = next(claim for claim in first if claim.id == a[0])
    assert queue.complete(done)
    (woken,) = queue.claim_many(10)
    assert woken.id == a[2]
    assert sorted(job.id for job in queue.blocked()) == a[3:]


def test_enqueue_many_leaves_jobs_ready_where_their_first_may_never_run(
    queue: jobq.Queue,
) -> None:
    # A taken unique key writes no row, and a parent's failure cancels the lot: no job is
    # left blocked behind a first job that is not there to end.
    parent = queue.enqueue(Noop())
    queue.enqueue_many([Limited("a", i) for i in range(4)], unique_key=[f"u{i}" for i in range(4)])
    queue.enqueue_many([Limited("b", i) for i in range(4)], after=[parent])
    assert queue.blocked() == []


def test_the_limited_work_a_pool_shares_is_its_ready_and_running_limited_jobs(
    queue: jobq.Queue,
) -> None:
    # What each worker of a pool takes its share of (worker/key_share.py): the limited jobs
    # that could run now. A job blocked behind its key's attempts, one due later and an
    # unlimited one are not part of it.
    queue.enqueue_many([Limited("a", i) for i in range(5)])
    queue.enqueue_many([Limited(f"k{i}") for i in range(3)])
    queue.enqueue(Limited("later"), delay=3600)
    queue.enqueue(Noop())
    assert queue._limited_work(100) == 2 + 3
    assert queue._limited_work(2) == 2, "each part counted up to the bound"
    claimed = queue.claim_many(10)
    assert len(claimed) == 6, "five limited jobs and the unlimited one"
    assert queue._limited_work(100) == 5, "in progress now"
    assert queue._limited_work(3) == 3


@pytest.mark.databases("postgresql")
def test_a_batched_acknowledgement_claims_the_next_job_of_each_key_it_frees(
    queue: jobq.Queue,
) -> None:
    # Claimed in the slot the completion frees: not woken by the ending and claimed later.
    # Among jobs of its priority only: a higher one of another key still goes first.
    queue.set_limit("limited", 1)
    a = queue.enqueue_many([Limited("a", i) for i in range(3)])
    (first,) = queue.claim_many(1)
    _, (second,) = queue.complete_many_and_claim([first], 1)
    assert second.id == a[1]
    urgent = queue.enqueue(Limited("b"), priority=5)
    _, (third,) = queue.complete_many_and_claim([second], 1)
    assert third.id == urgent
    assert queue.blocked() == [], "the ending woke the key's next job instead"
    (fourth,) = queue.claim_many(1)
    assert fourth.id == a[2]


@pytest.mark.databases("postgresql")
def test_a_batched_acknowledgement_claims_next_jobs_only_into_free_slots(
    queue: jobq.Queue,
) -> None:
    # Counted after its completions, with the attempts of the key it did not complete: one
    # slot of two freed, one job; the limit lowered to what still runs, none.
    a = queue.enqueue_many([Limited("a", i) for i in range(5)])
    first = sorted(queue.claim_many(2), key=lambda claim: claim.id)
    assert [claim.id for claim in first] == a[:2]
    _, claimed = queue.complete_many_and_claim(first[:1], 10)
    assert [claim.id for claim in claimed] == a[2:3]
    queue.set_limit("limited", 1)
    _, claimed = queue.complete_many_and_claim(first[1:], 10)
    assert claimed == []
    assert sorted(job.id for job in queue.blocked()) == a[3:]
    assert running_by_key(queue) == {"a": 1}


@pytest.mark.databases("postgresql")
def test_a_batched_acknowledgement_leaves_a_paused_type_s_next_jobs(queue: jobq.Queue) -> None:
    # The ending wakes the next job instead, for a claim once the type is resumed.
    queue.set_limit("limited", 1)
    a = queue.enqueue_many([Limited("a", i) for i in range(3)])
    (first,) = queue.claim_many(1)
    queue.pause("limited")
    _, claimed = queue.complete_many_and_claim([first], 5)
    assert claimed == []
    assert [job.id for job in queue.blocked()] == a[2:]
    queue.resume("limited")
    assert [claim.id for claim in queue.claim_many(5)] == a[1:2]


@pytest.mark.lease(1)
def test_a_slot_is_free_once_its_lease_ends(queue: jobq.Queue) -> None:
    """As when a master is SIGKILLed with the attempt: nothing settles it, yet once its
    lease has ended the key takes a new attempt; settling it wakes the blocked job."""
    queue.set_limit("limited", 1)
    held = queue.enqueue(Limited("a"))
    waiting = queue.enqueue(Limited("a"))
    claim = queue.claim()
    assert claim is not None
    assert claim.id == held
    assert queue.claim() is None
    wait_lease_ended(queue, held)
    fresh = queue.enqueue(Limited("a"))
    again = queue.claim()
    assert again is not None
    assert again.id == fresh
    assert queue.run_maintenance()["requeued"] == 1
    assert queue.complete(again)
    last = queue.claim()
    assert last is not None
    assert last.id in (held, waiting)


@pytest.mark.lease(1)
def test_a_slot_an_ended_lease_freed_wakes_the_jobs_blocked_on_it(queue: jobq.Queue) -> None:
    """As when a master is SIGKILLed with its attempts: a claim that finds nothing else
    ready wakes the best job blocked on a key whose lease ended, and takes it, before
    maintenance ran; maintenance's recovery of the ended attempts wakes the rest of the key's
    blocked jobs within its own transaction, before any claim."""
    ids = [queue.enqueue(Limited("a", i), priority=-i) for i in range(4)]
    recovered = [queue.enqueue(Limited("a", i), type="recovered") for i in range(3)]
    held = queue.claim_many(10)
    assert {claim.id for claim in held} == {*ids[:2], *recovered[:2]}
    assert {job.id for job in queue.blocked()} == {*ids[2:], recovered[2]}
    assert queue.claim() is None
    for claim in held:
        wait_lease_ended(queue, claim.id)
    woken = queue.claim("limited")
    assert woken is not None
    assert woken.id == ids[2]
    assert queue.waits_on(ids[3]) == ("a", None)
    assert queue.run_maintenance()["requeued"] == 4
    assert queue.blocked() == []


def test_maintenance_wakes_jobs_stranded_behind_a_key_nothing_holds(
    queue: jobq.Queue, caplog: pytest.LogCaptureFixture
) -> None:
    """The net under a missed wake-up: a job left blocked on a key with no attempt in progress
    (made here by hand, as the race that leaves one would) is claimable after maintenance,
    which says so; a key whose attempt still holds its slot keeps its blocked jobs."""
    # Key a has been claimed and ended, as a key with a missed wake-up has.
    queue.enqueue(Limited("a", 0))
    ended = queue.claim("limited")
    assert ended is not None
    assert queue.complete(ended)
    *held, waiting = [queue.enqueue(Limited("b", i)) for i in range(3)]
    assert [claim.id for claim in queue.claim_many(3, "limited")] == held
    stranded = queue.enqueue(Limited("a", 1))
    queue.backend.execute(
        f"UPDATE jobq_jobs SET blocked_on = '{CONCURRENCY}' WHERE id = {int(stranded)}"
    )
    assert {job.id for job in queue.blocked()} == {stranded, waiting}
    assert queue.claim("limited") is None
    # Key c's woken job waits for its claim, whose ending wakes the next: not stranded.
    queue.enqueue(Limited("c", 0))
    c_ended = queue.claim("limited")
    assert c_ended is not None
    assert queue.complete(c_ended)
    queue.enqueue(Limited("c", 1))
    behind = queue.enqueue(Limited("c", 2))
    queue.backend.execute(
        f"UPDATE jobq_jobs SET blocked_on = '{CONCURRENCY}' WHERE id = {int(behind)}"
    )
    with caplog.at_level("WARNING", logger="jobq"):
        queue.run_maintenance()
    assert "woke 1 job(s) blocked on a key with no attempt holding a slot" in caplog.text
    assert [job.id for job in queue.blocked()] == [behind, waiting]
    # The woken job sits before the session's claim cursor on PostgreSQL and MariaDB, which
    # a walk from the head of the index reaches at once only when due (cursors.py of each).
    if queue.backend.kind == "postgresql":
        queue.backend.execute("SET jobq.claim_rewalk_seconds = 0")
    if isinstance(queue.backend, MysqlBackend):
        queue.backend.claim_cursors.rewalk_seconds = 0
    woken = queue.claim("limited")
    assert woken is not None
    assert woken.id == stranded


def test_an_override_is_read_at_claim_time(queue: jobq.Queue) -> None:
    ids = [queue.enqueue(Limited("a", i)) for i in range(5)]
    assert len(queue.claim_many(5)) == 2
    queue.set_limit("limited", 4)
    assert len(queue.claim_many(5)) == 2
    assert running_by_key(queue)["a"] == 4
    queue.set_limit("limited", 1)
    assert queue.claim() is None
    queue.set_limit("limited", None)
    assert queue.limits()[0].in_force == 2
    assert queue.waits_on(ids[4]) in (("a", None), ("a", CONCURRENCY))


def test_concurrent_claims_never_start_an_attempt_beyond_the_limit(
    queue: jobq.Queue, dsn: str
) -> None:
    queue.enqueue_many([Limited(f"k{i % 3}", i) for i in range(90)])
    stop = threading.Event()
    peaks: list[int] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            with jobq.Queue.connect(dsn) as mine:
                while not stop.is_set():
                    batch = mine.claim_many(3)
                    left = mine.counts("limited")
                    if not batch and not left.get("pending") and not left.get("in_progress"):
                        return
                    for claim in batch:
                        mine.complete(claim)
        except BaseException as error:
            errors.append(error)

    def watch() -> None:
        with jobq.Queue.connect(dsn) as mine:
            while not stop.is_set():
                peaks.append(max(running_by_key(mine).values(), default=0))

    workers = [threading.Thread(target=work) for _ in range(4)]
    watcher = threading.Thread(target=watch)
    for thread in [*workers, watcher]:
        thread.start()
    for thread in workers:
        thread.join(60)
    stop.set()
    watcher.join(10)
    assert not errors
    assert peaks
    assert max(peaks) <= 2
    assert queue.counts("limited").get("completed") == 90
