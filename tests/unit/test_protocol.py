"""Every message fits, by construction: one larger than a socket pair takes travels in parts,
on real sockets, and comes out whole; --prefetch is bounded."""

from __future__ import annotations

import marshal
import threading
import time
from dataclasses import replace
from datetime import timedelta

import pytest

from jobq import protocol, wire
from jobq.options import MAX_PREFETCH
from jobq.retry import RetryPolicy
from jobq.supervisor.config import SupervisorConfig
from tests.support.claims import claim

ROUND = 10_000


def renew_round() -> protocol.Renew:
    return protocol.Renew(7, [(job_id, f"{job_id:032x}") for job_id in range(1, ROUND + 1)])


def size(message: protocol.Message) -> int:
    return len(marshal.dumps(protocol.encode(message)))


def test_the_limit_is_what_a_socket_pair_takes() -> None:
    most = wire.limit()
    assert 0 < most <= wire.MAX_MESSAGE
    ours, theirs = wire.pair()
    try:
        ours.send(bytes(most))
        assert len(theirs.recv(wire.MAX_MESSAGE)) == most
    finally:
        ours.close()
        theirs.close()


def test_a_renewal_round_of_10000_claims_reaches_the_renewer_whole() -> None:
    # The master's end is non-blocking: what the socket does not take waits in the outbox,
    # and goes out as the renewer reads.
    request = renew_round()
    assert size(request) > wire.limit(), "the round would fit in one datagram anyway"
    ours, theirs = wire.pair()
    received: list[protocol.Message | None] = []
    reader = threading.Thread(target=lambda: received.append(wire.receive(theirs)))
    try:
        ours.setblocking(False)
        reader.start()
        outbox = wire.Outbox(ours)
        outbox.put(request)
        deadline = time.monotonic() + 10
        while outbox.waiting and time.monotonic() < deadline:
            time.sleep(0.001)
            outbox.flush()
        reader.join(10)
        (renew,) = received
        assert isinstance(renew, protocol.Renew)
        assert renew.round == request.round
        assert renew.claims == request.claims
    finally:
        ours.close()
        theirs.close()


def test_a_large_answer_is_read_whole_from_a_non_blocking_socket() -> None:
    extended = list(range(10**6, 10**6 + 4 * ROUND))
    answer = protocol.Renewed(7, extended, cancelled=tuple(extended[::3]))
    # A dead worker's longest claim, completed, each attempt with a result of 1 KiB.
    completed = protocol.attempts(
        replace(claim(n), result=f"{n:04}" * 256) for n in range(MAX_PREFETCH)
    )
    left = protocol.LeftBehind("worker-1", completed)
    assert min(size(answer), size(left)) > wire.limit()
    ours, theirs = wire.pair()

    def send_both() -> None:
        wire.send(theirs, answer)
        wire.send(theirs, left)

    sender = threading.Thread(target=send_both)
    try:
        ours.setblocking(False)
        sender.start()
        received: list[protocol.Message] = []
        deadline = time.monotonic() + 10
        while len(received) < 2 and time.monotonic() < deadline:
            received += wire.waiting(ours)  # a message half arrived waits for the rest
            time.sleep(0.001)
        sender.join(10)
        renewed, left_behind = received
        assert isinstance(renewed, protocol.Renewed)
        assert (renewed.extended, renewed.cancelled) == (extended, tuple(extended[::3]))
        assert left_behind == left
    finally:
        ours.close()
        theirs.close()


def test_every_part_fits_the_limit_it_was_cut_for_its_mark_included() -> None:
    attempts = [(job_id, f"token-{job_id}") for job_id in range(10**6, 10**6 + 100)]
    message = protocol.Releasing(attempts)
    # Halves that would just fit, but for the mark that says more parts follow.
    half = len(marshal.dumps({"kind": "releasing", "attempts": attempts[:50]}))
    datagrams = wire.parts(message, most=half + 5)
    assert len(datagrams) > 1
    assert max(map(len, datagrams)) <= half + 5


def test_a_message_that_no_split_can_fit_is_an_error() -> None:
    with pytest.raises(wire.MessageTooLarge):
        wire.parts(protocol.Releasing([(1, "a"), (2, "b")]), most=10)


def test_a_prefetch_beyond_the_bound_is_refused_in_one_line() -> None:
    config = SupervisorConfig(dsn="postgresql://jobq@db/jobq", prefetch=MAX_PREFETCH + 1)
    problems = config.problems()
    assert problems == [
        f"--prefetch must be at most {MAX_PREFETCH}, got {MAX_PREFETCH + 1}: a longer claim "
        "saves no more round trips; give a smaller --prefetch"
    ]
    assert SupervisorConfig(dsn="postgresql://jobq@db/jobq", prefetch=MAX_PREFETCH).problems() == []


def test_a_claim_s_attempts_reach_the_master_as_they_were_claimed_but_the_payload() -> None:
    # Lease ends and policies are written once per run of one object: attempts whose ends
    # or policies differ must each still arrive with their own.
    later = claim(2).lease_until + timedelta(seconds=5)
    sent = [
        replace(claim(1), payload="{}"),
        replace(claim(2), retry=RetryPolicy(max_attempts=7, jitter=False), result='"done"'),
        replace(claim(3), lease_until=later, deadline=later + timedelta(hours=1)),
        claim(4),
    ]
    message = protocol.Claimed(protocol.attempts(sent))
    (data,) = wire.parts(message)
    received = protocol.decode(marshal.loads(data))
    assert isinstance(received, protocol.Claimed)
    assert protocol.claims(received.attempts) == [replace(each, payload="") for each in sent]
