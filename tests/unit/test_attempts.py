"""The master's attempt state machine (supervisor/attempts.py), without processes: every
transition, every one it refuses, and a worker's messages and fence-slot reads arriving in
each order the protocol allows."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import cast

import pytest

from jobq import protocol, wire
from jobq.supervisor.attempts import ALLOWED, Attempt, Attempts, Refused, State
from jobq.supervisor.config import SupervisorConfig
from jobq.supervisor.forking import Forked
from jobq.supervisor.master import Master
from jobq.supervisor.states import StopReason
from jobq.supervisor.workers import WorkerProcess
from jobq.worker.fence import FenceTable, Hold, token_key
from jobq.worker.mark import SettlingMark
from tests.support.claims import claim

# A pid no process can have (above the kernel's pid_max): signals to it find nobody.
NOBODY = 2**22 + 7


def worker(pid: int = NOBODY, sock: socket.socket | None = None, slots: int = 1) -> WorkerProcess:
    table = FenceTable(slots)
    rows = [table.allocate() for _ in range(slots)]
    assert all(row is not None for row in rows)
    process = Forked(pid, -1, cast(socket.socket, sock))
    return WorkerProcess(process, cast(SettlingMark, None), rows, "w1", 0, 0.0, "*")  # type: ignore[arg-type]


def claims(process: WorkerProcess, *job_ids: int, at_once: bool = False) -> None:
    process.claimed(protocol.attempts([claim(i) for i in job_ids]), now=0.0, at_once=at_once)


def at(*job_ids: int) -> list[protocol.Named]:
    return [(job_id, f"token-{job_id}") for job_id in job_ids]


def slot_names(process: WorkerProcess, job_id: int, since: float) -> None:
    """The worker's side of a start: its fence slot names the attempt."""
    hold = Hold(process.pid, job_id, token_key(f"token-{job_id}"), 100.0 + job_id, since)
    process.slots[0].worker.write(hold)


def states(process: WorkerProcess) -> dict[int, State]:
    return {job_id: each.state for job_id, each in process.attempts.by_id.items()}


# -- the machine on its own ---------------------------------------------------------------------


def reach(book: Attempts, state: State) -> Attempt:
    """A new attempt in `state`, by the transitions that lead there."""
    held = book.claimed(
        claim(len(book.by_id) + 1), 0.0, runs=state not in (State.CLAIMED, State.LOST)
    )
    if state in (State.STOPPING, State.COMPLETED, State.UNRECORDED):
        if state is State.STOPPING:
            book.stop_alone(held, StopReason.JOB_TIMEOUT, 9.0)
        else:
            book.settle(held, 1.0, state is State.COMPLETED, '"r"')
    elif state is State.LOST:
        book.lose(held)
    elif state is State.ENDED:
        book.end(held)
    assert held.state is state
    return held


def transitions() -> Iterator[tuple[State, State]]:
    for source in State:
        for target in State:
            yield source, target


@pytest.mark.parametrize(("source", "target"), list(transitions()))
def test_each_move_is_made_or_refused_as_the_table_says(source: State, target: State) -> None:
    book = Attempts()
    held = reach(book, source)
    if target in ALLOWED[source]:
        book.move(held, target)
        assert held.state is target
        indexed = {state: list(book.of(state)) for state in State if state is not State.ENDED}
        assert [s for s, ids in indexed.items() if held.claim.id in ids] == (
            [] if target is State.ENDED else [target]
        ), "in the view of its state, and only there"
    else:
        with pytest.raises(Refused, match=f"from {source} to {target}"):
            book.move(held, target)
        assert held.state is source, "a refused move changes nothing"


def test_an_ended_attempt_can_go_nowhere_and_is_no_longer_held() -> None:
    book = Attempts()
    held = reach(book, State.ENDED)
    assert book.get(held.claim.id) is None
    with pytest.raises(Refused):
        book.stop_alone(held, StopReason.CANCELLED, 1.0)
    with pytest.raises(Refused):
        book.stop_worker(held)
    with pytest.raises(Refused):
        book.start(held, 1.0)


def test_a_claimed_attempt_starts_when_the_slot_says_and_its_start_is_not_yet_recorded() -> None:
    book = Attempts()
    first = book.claimed(claim(1), 0.0, runs=True)
    queued = book.claimed(claim(2), 0.0, runs=False)
    assert (first.state, first.start_recorded) == (State.RUNNING, True)
    assert (queued.state, queued.start_recorded) == (State.CLAIMED, False)
    book.start(queued, 4.0)
    assert (queued.state, queued.started) == (State.RUNNING, 4.0)


def test_a_settled_attempt_keeps_when_its_code_first_ended_and_takes_its_result() -> None:
    book = Attempts()
    held = book.claimed(claim(1), 0.0, runs=True)
    book.settle(held, 2.0, True, None)
    book.settle(held, 5.0, True, '"late"')
    assert (held.state, held.ended, held.claim.result) == (State.COMPLETED, 2.0, '"late"')
    book.settle(held, 6.0, False, None)
    assert (held.state, held.ended) == (State.UNRECORDED, 2.0)


def test_views_keep_the_order_each_attempt_entered_its_state_and_running_the_claim_order() -> None:
    book = Attempts()
    one, two, three = (book.claimed(claim(i), 0.0, runs=True) for i in (1, 2, 3))
    book.stop_alone(one, StopReason.JOB_TIMEOUT, 9.0)
    assert list(book.running()) == [1, 2, 3], "the earliest lease is the first claimed on a tie"
    book.settle(three, 1.0, True, None)
    book.settle(two, 2.0, True, None)
    assert list(book.of(State.COMPLETED)) == [3, 2]
    book.settle(three, 3.0, True, '"r"')
    assert list(book.of(State.COMPLETED)) == [2, 3], "as the old map, re-entered at its end"


def test_a_new_attempt_of_a_job_replaces_the_one_the_master_still_had() -> None:
    book = Attempts()
    old = book.claimed(claim(1), 0.0, runs=False)
    book.lose(old)
    new = book.claimed(claim(1), 1.0, runs=True)
    assert book.get(1) is new
    assert not book.of(State.LOST)


# -- messages and the fence slot, in every order ------------------------------------------------


def test_settling_read_before_the_slot_names_the_next_keeps_the_result() -> None:
    process = worker()
    claims(process, 1, 2)
    process.settling(at(1), now=4.0, completed={1: '"one"'})
    slot_names(process, 2, since=5.0)
    assert process.follow() == 2
    assert states(process) == {1: State.COMPLETED, 2: State.RUNNING}
    assert process.completed[1].claim.result == '"one"'
    assert process.completed[1].ended == 4.0


def test_settling_read_after_the_slot_named_the_next_adds_its_result_or_makes_it_unrecorded() -> (
    None
):
    process = worker()
    claims(process, 1, 2, 3)
    slot_names(process, 3, since=5.0)
    assert process.follow() == 3
    assert states(process) == {1: State.COMPLETED, 2: State.COMPLETED, 3: State.RUNNING}
    process.settling(at(1, 2), now=6.0, completed={1: '"one"'})
    assert process.completed[1].claim.result == '"one"'
    assert process.completed[1].ended == 5.0, "ended when the slot said the next started"
    assert states(process)[2] is State.UNRECORDED, "its failure only the worker records"


def test_finished_for_an_attempt_taken_as_completed_from_the_slot_ends_it() -> None:
    process = worker()
    claims(process, 1, 2)
    slot_names(process, 2, since=5.0)
    process.follow()
    ended = process.finished(1, "token-1")
    assert ended is not None
    assert ended.state is State.ENDED
    assert states(process) == {2: State.RUNNING}


def test_finished_before_the_slot_names_the_next_starts_the_ones_before_it() -> None:
    process = worker()
    claims(process, 1, 2, 3)
    assert process.finished(2, "token-2") is not None
    assert states(process) == {1: State.COMPLETED, 3: State.CLAIMED}
    slot_names(process, 2, since=5.0)
    assert process.follow() is None, "the slot names one already ended: nothing new"


def test_settling_read_after_finished_ends_nothing_more() -> None:
    process = worker()
    claims(process, 1, at_once=True)
    assert process.finished(1, "token-1") is not None
    process.settling(at(1), now=2.0, completed={1: '"late"'})
    assert states(process) == {}
    assert process.finished(1, "token-1") is None


def test_settling_for_an_unrecorded_attempt_leaves_it_unrecorded() -> None:
    process = worker()
    claims(process, 1, at_once=True)
    process.settling(at(1), now=1.0, completed={})
    process.settling(at(1), now=2.0, completed={1: '"r"'})
    assert states(process) == {1: State.UNRECORDED}


def test_released_after_lost_forgets_the_lost_attempt_and_returns_no_lease() -> None:
    process = worker()
    claims(process, 1, 2, 3)
    assert process.lose(2, "token-2")
    assert process.lost == {2}
    assert process.holding(2, "token-2") is None, "the master no longer vouches for it"
    assert [each.claim.id for each in process.leases()] == [1, 3]
    assert process.released(at(2)) == [], "no lease given back: the round took it"
    assert states(process) == {1: State.RUNNING, 3: State.CLAIMED}
    assert not process.lost


def test_released_returns_the_queued_attempts_it_gives_back_and_not_a_lost_one() -> None:
    process = worker()
    claims(process, 1, 2, 3)
    process.lose(2, "token-2")
    given = process.released(at(2, 3))
    assert [each.claim.id for each in given] == [3]
    assert states(process) == {1: State.RUNNING}


def test_a_round_missing_a_running_or_other_token_loses_nothing_queued() -> None:
    process = worker()
    claims(process, 1, 2)
    assert not process.lose(1, "token-1"), "a running one is fenced, not lost"
    assert not process.lose(2, "token-of-another-attempt")
    assert states(process) == {1: State.RUNNING, 2: State.CLAIMED}


def test_the_slot_naming_a_lost_attempt_is_reported_every_pass_and_starts_nothing() -> None:
    process = worker()
    claims(process, 1, 2)
    process.lose(2, "token-2")
    assert process.follow() is None, "the slot still names 1"
    slot_names(process, 2, since=3.0)
    assert process.follow() == 2
    assert process.follow() == 2
    assert states(process) == {1: State.RUNNING, 2: State.LOST}
    assert process.finished(2, "token-2") is None


def test_a_lost_attempt_does_not_keep_its_worker_busy() -> None:
    process = worker()
    claims(process, 1, 2)
    process.lose(2, "token-2")
    process.finished(1, "token-1")
    assert not process.busy


# -- stops ---------------------------------------------------------------------------------------


@pytest.fixture
def master() -> Iterator[Master]:
    master = Master(SupervisorConfig(dsn="postgresql://jobq@db/jobq"))
    try:
        yield master
    finally:
        master.selector.close()


def test_a_stop_for_an_attempt_is_called_off_when_it_settles(master: Master) -> None:
    process = worker()
    claims(process, 1, 2)
    master.stopper.stop(process, StopReason.JOB_TIMEOUT, now=0.0, for_attempt=process.running[1])
    assert process.stopped is process.attempts.get(1)
    assert states(process)[1] is State.STOPPING
    assert (process.stop_reason, process.kill_at) != (None, None)
    assert [each.claim.id for each in process.leases()] == [2], "no longer vouched for"
    process.settling(at(1), now=1.0, completed={})
    assert (process.stopped, process.stop_reason, process.kill_at) == (None, None, None)


def test_a_stop_for_an_attempt_is_called_off_when_it_is_finished_at_once(master: Master) -> None:
    process = worker()
    claims(process, 1, at_once=True)
    master.stopper.stop(process, StopReason.CANCELLED, now=0.0, for_attempt=process.running[1])
    assert process.finished(1, "token-1") is not None
    assert (process.stopped, process.stop_reason, process.kill_at) == (None, None, None)


def test_a_shutdown_stop_is_the_worker_s_and_outlives_its_attempts(master: Master) -> None:
    process = worker()
    claims(process, 1, at_once=True)
    master.stopper.stop(process, StopReason.SHUTDOWN, now=0.0)
    assert process.stopped is None
    assert states(process) == {1: State.RUNNING}
    process.finished(1, "token-1")
    assert process.stop_reason is StopReason.SHUTDOWN


def test_a_second_stop_takes_the_worker_s_stop_from_the_first_attempt(master: Master) -> None:
    process = worker(slots=2)
    claims(process, 1, 2, at_once=True)
    process.stop_for(StopReason.RENEWAL, process.running[1])
    process.stop_for(StopReason.LOST, process.running[2])
    assert process.stopped is process.attempts.get(2)
    process.settling(at(1), now=1.0, completed={})
    assert process.stop_reason is StopReason.LOST, "the first attempt's end calls off nothing"
    process.settling(at(2), now=1.0, completed={})
    assert process.stop_reason is None


def test_an_attempt_stopped_alone_is_stopping_until_it_settles(master: Master) -> None:
    ours, theirs = wire.pair()
    with ours, theirs:
        process = worker(sock=ours, slots=2)
        claims(process, 1, 2, at_once=True)
        master.stopper.stop_attempt(process, process.running[1], StopReason.CANCELLED, 1.0)
        stopping = process.attempts.get(1)
        assert stopping is not None
        assert stopping.alone is not None
        assert stopping.alone[1] is StopReason.CANCELLED
        assert process.stop_reason is None, "its worker goes on running the other"
        assert master.stopper.next_due(process) <= stopping.alone[0]
        master.stopper.cancel(process, stopping, 2.0)
        assert stopping.alone[1] is StopReason.CANCELLED, "a second stop changes nothing"
        process.settling(at(1), now=3.0, completed={})
        assert stopping.alone is None
        assert list(process.running) == [2]


def test_a_stop_for_an_ended_attempt_stops_nothing(master: Master) -> None:
    process = worker()
    claims(process, 1, 2)
    first = process.running[1]
    slot_names(process, 2, since=1.0)
    process.follow()
    process.finished(1, "token-1")
    master.stopper.cancel(process, first, 2.0)
    assert (process.stop_reason, first.state) == (None, State.ENDED)
    assert states(process) == {2: State.RUNNING}


# -- a dead worker --------------------------------------------------------------------------------


def test_a_dead_worker_s_doubtful_attempts_keep_the_stop_that_was_for_them(master: Master) -> None:
    process = worker()
    claims(process, 1, 2)
    master.stopper.stop(process, StopReason.JOB_TIMEOUT, now=0.0, for_attempt=process.running[1])
    slot_names(process, 1, since=0.0)
    section = process.slots[0].worker
    section.memory[section.offset] |= 1  # it died writing its slot
    process.follow_left()
    assert states(process) == {1: State.UNRECORDED, 2: State.CLAIMED}
    assert process.stopped is process.attempts.get(1)
    assert process.stop_reason is StopReason.JOB_TIMEOUT
