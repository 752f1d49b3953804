"""--prefetch's rules, without processes: how many jobs a worker claims, when a queued job may
still start, and the attempts the master holds for a worker as its messages arrive."""

from __future__ import annotations

import socket
from typing import cast

import pytest

from jobq import protocol, wire
from jobq.lease_clock import startable
from jobq.options import MAX_PREFETCH
from jobq.supervisor.forking import Forked
from jobq.supervisor.settlement import left_behind
from jobq.supervisor.states import StopReason
from jobq.supervisor.workers import WorkerProcess
from jobq.worker.fence import FenceTable, Hold, Slot, token_key
from jobq.worker.mark import SettlingMark
from jobq.worker.prefetch import ADAPTIVE_MAX, BATCH_SECONDS, SHORT, WINDOW, PrefetchRule
from tests.support.claims import claim

# What a lease vouches for, start to kill point: the default lease's, about.
VOUCHED = 598.0


def warmed(rule: PrefetchRule, durations: dict[str, float]) -> PrefetchRule:
    for job_type, seconds in durations.items():
        for _ in range(WINDOW):
            rule.ran(job_type, seconds)
    rule.claimed(1, 1)
    return rule


def test_an_adaptive_worker_claims_one_job_until_it_has_seen_short_jobs_and_a_full_claim() -> None:
    rule = PrefetchRule(None, (), VOUCHED)
    assert rule.size() == 1
    rule.claimed(1, 1)
    assert rule.size() == 1, "no job seen yet: unseen types count as long"
    warmed(rule, {"a": SHORT / 10})
    assert rule.size() == ADAPTIVE_MAX


def test_an_adaptive_worker_claims_as_many_as_it_found_when_the_backlog_ran_short() -> None:
    rule = warmed(PrefetchRule(None, (), VOUCHED), {"a": SHORT / 10})
    rule.claimed(ADAPTIVE_MAX, 3)
    assert rule.size() == 3
    rule.claimed(3, 0)
    assert rule.size() == 1, "nothing found: one job"
    rule.claimed(1, 1)
    assert rule.size() == ADAPTIVE_MAX


def test_a_short_claim_of_long_jobs_still_claims_one() -> None:
    rule = warmed(PrefetchRule(None, (), VOUCHED), {"a": SHORT * 2})
    rule.claimed(1, 0)
    assert rule.size() == 1


def sizes_while_full(rule: PrefetchRule, claims: int) -> list[int]:
    """The sizes of `claims` claims in a row that each came back full."""
    sizes = []
    for _ in range(claims):
        sizes.append(rule.size())
        rule.claimed(sizes[-1], sizes[-1])
    return sizes


def test_full_claims_of_very_short_jobs_double_the_batch_up_to_the_message_bound() -> None:
    rule = warmed(PrefetchRule(None, (), VOUCHED), {"a": 0.0001})
    assert sizes_while_full(rule, 9) == [10, 20, 40, 80, 160, 320, 640, MAX_PREFETCH, MAX_PREFETCH]
    rule.claimed(MAX_PREFETCH, 7)
    assert rule.size() == 7, "the backlog ran short: as many as it found, growing from there"
    assert sizes_while_full(rule, 4) == [7, 10, 20, 40]


def test_a_grown_batch_runs_within_its_time_by_the_slowest_median() -> None:
    rule = warmed(PrefetchRule(None, (), VOUCHED), {"a": 0.0001, "b": 0.004})
    ceiling = int(BATCH_SECONDS / 0.004)
    assert sizes_while_full(rule, 6) == [10, 20, 40, 80, ceiling, ceiling]


def test_a_grown_batch_runs_within_half_of_what_a_lease_vouches_for() -> None:
    rule = warmed(PrefetchRule(None, (), vouched=0.2), {"a": 0.001})
    assert sizes_while_full(rule, 5) == [10, 20, 40, 80, 100]
    assert warmed(PrefetchRule(None, (), vouched=0.01), {"a": 0.001}).size() == ADAPTIVE_MAX


def test_one_long_type_among_those_seen_keeps_an_untyped_worker_at_one_job() -> None:
    rule = warmed(PrefetchRule(None, (), VOUCHED), {"short": SHORT / 10, "long": SHORT * 4})
    assert rule.size() == 1


def test_the_median_decides_so_one_slow_job_does_not_stop_the_batches() -> None:
    rule = warmed(PrefetchRule(None, (), VOUCHED), {"a": SHORT / 10})
    rule.ran("a", 30.0)
    assert rule.size() == ADAPTIVE_MAX
    for _ in range(WINDOW):
        rule.ran("a", SHORT)
    assert rule.size() == 1, "a median of exactly the threshold is not short"


def test_a_slow_first_run_is_replaced_by_the_second() -> None:
    rule = PrefetchRule(None, (), VOUCHED)
    rule.ran("a", SHORT * 2)
    rule.claimed(1, 1)
    assert rule.size() == 1, "all it knows says long"
    rule.ran("a", SHORT / 100)
    assert rule.size() == ADAPTIVE_MAX
    rule.ran("a", SHORT * 2)
    rule.ran("a", SHORT * 2)
    assert rule.size() == 1, "later runs all count"


def test_a_typed_worker_counts_a_type_it_may_claim_and_never_ran_as_long() -> None:
    rule = warmed(PrefetchRule(None, ("a", "b"), VOUCHED), {"a": SHORT / 10})
    assert rule.size() == 1
    warmed(rule, {"b": SHORT / 10, "elsewhere": 5.0})
    assert rule.size() == ADAPTIVE_MAX, "a type it may not claim does not count"


@pytest.mark.parametrize("fixed", [1, 3, 50])
def test_a_fixed_prefetch_is_the_size_whatever_the_jobs_took(fixed: int) -> None:
    rule = PrefetchRule(fixed, (), VOUCHED)
    assert rule.size() == fixed
    warmed(rule, {"a": 10.0})
    rule.claimed(fixed, 0)
    assert rule.size() == fixed


def test_a_worker_running_limited_jobs_claims_its_share_at_once_within_the_ceiling() -> None:
    rule = warmed(PrefetchRule(None, (), VOUCHED), {"a": 0.0001})
    assert rule.size(share=125) == 125, "no doubling through 10, 20, 40 and 80 first"
    rule.claimed(125, 125)
    assert rule.size(share=125) == 125, "a full claim grows no further than the share"
    assert rule.size(share=3) == 125, "a smaller share moves none of the keys it holds"
    rule.claimed(125, 4)
    assert rule.size(share=3) == ADAPTIVE_MAX
    assert rule.size(share=5000) == MAX_PREFETCH
    slow = warmed(PrefetchRule(None, (), VOUCHED), {"a": 0.004})
    assert slow.size(share=500) == int(BATCH_SECONDS / 0.004)


def test_a_share_changes_nothing_for_long_jobs_or_a_fixed_prefetch() -> None:
    assert warmed(PrefetchRule(None, (), VOUCHED), {"a": SHORT * 2}).size(share=125) == 1
    assert PrefetchRule(None, (), VOUCHED).size(share=125) == 1, "no job seen yet"
    assert PrefetchRule(7, (), VOUCHED).size(share=125) == 7


def test_a_queued_job_starts_only_with_more_than_half_its_vouched_lease_left() -> None:
    # A 10 s lease with a 1.9 s margin vouches for 8 s (to the kill point, 0.1 s earlier).
    def left(seconds: float) -> bool:
        return startable(expires=100.0 + seconds, now=100.0, lease=10.0, safety_margin=1.9)

    assert left(10.0)
    assert left(6.01)
    assert not left(6.0), "exactly half is not more than half"
    assert not left(2.0)
    assert not left(-1.0)
    # A margin so wide that half a lease would leave the kill point behind.
    assert not startable(expires=105.5, now=100.0, lease=10.0, safety_margin=6.0)


# -- the master's view of a worker's attempts ---------------------------------------------------


def worker_rest(slot: Slot | None = None) -> tuple[SettlingMark, list[Slot], str, int, float, str]:
    # The worker's fence slot says which attempt it runs; the mark plays no part here.
    row = FenceTable(1).allocate() if slot is None else slot
    assert row is not None
    return cast(SettlingMark, None), [row], "w1", 0, 0.0, "*"


def worker(pid: int = 2**22 + 1) -> WorkerProcess:
    return WorkerProcess(Forked(pid, -1, cast(socket.socket, None)), *worker_rest())


def held(process: WorkerProcess) -> list[int]:
    return [lease.claim.id for lease in process.leases()]


def runs(process: WorkerProcess, job_id: int, since: float) -> None:
    """The worker's side of a start: it holds the attempt in its fence slot."""
    key = token_key(f"token-{job_id}")
    process.slots[0].worker.write(Hold(process.pid, job_id, key, 100.0 + job_id, since))


def test_the_master_holds_a_worker_s_running_queued_and_completed_attempts() -> None:
    process = worker()
    process.claimed(protocol.attempts([claim(1), claim(2), claim(3)]), now=0.0)
    assert list(process.running) == [1]
    assert list(process.queued) == [2, 3]
    assert held(process) == [1, 2, 3]

    # 1 completed with a result, which its worker sends before it starts 2.
    process.settling(at(1), now=4.0, completed={1: '{"rows": 3}'})
    runs(process, 2, since=5.0)
    assert process.follow() == 2
    started = process.running[2]
    assert list(process.running) == [2]
    assert started.started == 5.0, "since when the slot says"
    assert list(process.completed) == [1]
    assert process.completed[1].claim.result == '{"rows": 3}', "with its result"
    assert held(process) == [2, 3, 1]

    assert process.finished(2, "token-2") is not None  # a failure, acknowledged at once
    process.released(at(3))
    assert held(process) == [1]
    assert process.finished(1, "token-1") is not None
    assert held(process) == []
    assert not process.busy


def test_the_slot_naming_a_later_attempt_says_the_ones_before_completed_with_no_result() -> None:
    process = worker()
    process.claimed(protocol.attempts([claim(i) for i in (1, 2, 3, 4, 5)]), now=0.0)
    runs(process, 4, since=7.0)
    assert process.follow() == 4
    assert (list(process.completed), list(process.running), list(process.queued)) == (
        [1, 2, 3],
        [4],
        [5],
    )
    assert all(lease.claim.result is None for lease in process.completed.values())
    assert process.follow() is None, "nothing new"
    # A result sent before the start of 4, read after the slot: it is kept; one too large
    # to carry leaves its attempt to maintenance should the worker die.
    process.settling(at(2, 3), now=8.0, completed={2: '"two"'})
    assert process.completed[2].claim.result == '"two"'
    assert list(process.unrecorded) == [3]


def test_a_failure_reported_for_a_queued_attempt_says_the_ones_before_it_ran() -> None:
    process = worker()
    process.claimed(protocol.attempts([claim(i) for i in (1, 2, 3, 4)]), now=0.0)
    assert process.finished(3, "token-3") is not None
    assert (list(process.completed), list(process.running), list(process.queued)) == (
        [1, 2],
        [],
        [4],
    )


def test_a_slot_write_in_progress_changes_nothing_until_it_is_whole() -> None:
    process = worker()
    process.claimed(protocol.attempts([claim(1), claim(2)]), now=0.0)
    section = process.slots[0].worker
    runs(process, 2, since=3.0)
    section.memory[section.offset] |= 1  # the writer's counter odd: mid-write
    assert process.follow() is None
    assert (list(process.running), list(process.queued)) == ([1], [2])


@pytest.mark.parametrize(
    ("failed_first", "named", "completed", "doubtful", "released"),
    [
        (False, 3, [1, 2], [3], [4]),  # died writing 3's start (or what followed it)
        (False, 1, [], [1], [2, 3, 4]),  # died writing what followed 1
        (False, 99, [], [1, 2, 3, 4], []),  # names nothing the master knows of
        # 1 failed; then 2 may have run and completed before the master read the slot.
        (True, 3, [2], [3], [4]),
        (True, 99, [], [2, 3, 4], []),
    ],
)
def test_a_worker_that_died_writing_its_slot_leaves_the_attempt_in_doubt_to_maintenance(
    failed_first: bool, named: int, completed: list[int], doubtful: list[int], released: list[int]
) -> None:
    # The named attempt may have ended or not have started: neither failed as an attempt
    # nor released at once; every attempt before it ended, every one after it never started.
    process = worker()
    process.claimed(protocol.attempts([claim(i) for i in (1, 2, 3, 4)]), now=0.0)
    if failed_first:
        assert process.finished(1, "token-1") is not None  # nothing runs, as the master sees it
    runs(process, named, since=3.0)
    section = process.slots[0].worker
    section.memory[section.offset] |= 1
    process.follow_left()
    behind = left_behind(process)
    assert [each.id for each in protocol.claims(behind.completed)] == completed
    assert sorted(behind.running) == doubtful, "not released: left to maintenance"
    assert list(process.queued) == released
    assert not process.running, "none failed as an attempt"


def test_a_dead_worker_s_whole_slot_says_which_attempt_it_died_running() -> None:
    process = worker()
    process.claimed(protocol.attempts([claim(i) for i in (1, 2, 3, 4)]), now=0.0)
    runs(process, 3, since=3.0)
    process.follow_left()
    assert [each.id for each in protocol.claims(left_behind(process).completed)] == [1, 2]
    assert (list(process.running), list(process.queued)) == ([3], [4])


def test_a_stopped_worker_s_running_attempt_is_no_longer_renewed_its_others_are() -> None:
    process = worker()
    process.claimed(protocol.attempts([claim(1), claim(2)]), now=0.0)
    process.stop_reason = StopReason.SHUTDOWN
    assert held(process) == [2]
    assert list(process.queued) == [2]


def test_a_round_finds_each_of_a_worker_s_attempts_by_its_token() -> None:
    process = worker()
    process.claimed(protocol.attempts([claim(1), claim(2)]), now=0.0)
    runs(process, 2, since=1.0)
    process.follow()
    for job_id in (1, 2):
        assert process.holding(job_id, f"token-{job_id}") is not None
    assert process.holding(2, "token-1") is None


def at(*job_ids: int) -> list[protocol.Named]:
    """Attempts as a message names them (tests.support.claims gives each job its token)."""
    return [(job_id, f"token-{job_id}") for job_id in job_ids]


def test_a_message_naming_an_attempt_the_master_no_longer_holds_ends_nothing() -> None:
    # The worker names every attempt by its token: a report of the job's earlier attempt
    # can never end the lease of the one running now.
    process = worker()
    process.claimed(protocol.attempts([claim(1)]), now=0.0, at_once=True)
    process.settling([(1, "token-of-an-earlier-attempt")], now=1.0, completed={})
    assert process.finished(1, "token-of-an-earlier-attempt") is None
    assert list(process.running) == [1]
    assert process.released([(1, "token-of-an-earlier-attempt")]) == []
    assert process.finished(1, "token-1") is not None
    assert not process.busy


def test_claims_and_acknowledgements_cross_the_socket_whole() -> None:
    sent: list[protocol.Message] = [
        protocol.Claimed(protocol.attempts([claim(1), claim(2)])),
        protocol.Settling(at(1), [(1, '"ok"')]),
        protocol.Finished(
            [(1, "token-1", "completed"), (2, "token-2", "completed")],
            protocol.attempts([claim(3)]),
            ran=[0.5, None],
        ),
        protocol.Releasing(at(4, 5)),
    ]
    ours, theirs = wire.pair()
    with ours, theirs:
        for message in sent:
            wire.send(ours, message)
        received = [wire.receive(theirs) for _ in sent]
    assert received[0] == sent[0]
    settling = received[1]
    assert isinstance(settling, protocol.Settling)
    assert ([tuple(each) for each in settling.attempts], dict(settling.results)) == (
        at(1),
        {1: '"ok"'},
    )
    assert received[3] == sent[3]
    finished = received[2]
    assert isinstance(finished, protocol.Finished)
    assert [tuple(each) for each in finished.outcomes] == [
        (1, "token-1", "completed"),
        (2, "token-2", "completed"),
    ]
    assert finished.then == protocol.attempts([claim(3)])
    assert finished.ran == [0.5, None]


def test_a_dead_worker_s_completions_are_acknowledged_with_their_results_and_no_other() -> None:
    # A concurrent worker killed while it records its attempts' ends: the master has the
    # completions it was told of acknowledged with their results, and leaves the failure and
    # the completion whose result was too large to carry to maintenance, never completed.
    process = WorkerProcess(Forked(2**22 + 3, -1, cast(socket.socket, None)), *worker_rest())
    process.claimed(protocol.attempts([claim(i) for i in (1, 2, 3, 4)]), now=0.0, at_once=True)
    large = "x" * (protocol.CARRIED_RESULT + 1)
    ended = [claim(1).completed('"small"'), claim(2).completed(None), claim(3).completed(large)]
    process.settling(at(1, 2, 3, 4), now=1.0, completed=dict(protocol.carried(ended)))
    behind = left_behind(process)
    assert {each.id: each.result for each in protocol.claims(behind.completed)} == {
        1: '"small"',
        2: None,
    }
    assert sorted(behind.running) == [3, 4]
    assert held(process) == [1, 2, 3, 4], "renewed until the worker reports their ends"
    for job_id in (1, 2, 3, 4):
        assert process.finished(job_id, f"token-{job_id}") is not None
    assert not process.busy
