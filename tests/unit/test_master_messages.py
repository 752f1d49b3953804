"""The master's reading of a worker's socket, in process: no worker is forked."""

from __future__ import annotations

import selectors
import socket
from types import SimpleNamespace
from typing import cast

import pytest

from jobq import protocol, wire
from jobq.supervisor.config import SupervisorConfig
from jobq.supervisor.forking import Forked
from jobq.supervisor.master import Master
from jobq.supervisor.renewal import Missed
from jobq.supervisor.states import StopReason
from jobq.supervisor.workers import WorkerProcess
from jobq.worker.fence import EMPTY, FenceTable, Hold, token_key
from jobq.worker.mark import SettlingMark
from tests.support.claims import claim


def test_a_worker_read_again_after_it_closed_its_socket_leaves_the_master_running() -> None:
    # A worker that closed its end is not reaped at once (its attempt may still be killed);
    # a renewal round that missed it meanwhile reads its socket once more.
    master = Master(SupervisorConfig(dsn="postgresql://jobq@db/jobq"))
    ours, theirs = wire.pair()
    worker = cast(WorkerProcess, SimpleNamespace(process=SimpleNamespace(sock=ours)))
    try:
        ours.setblocking(False)
        master.selector.register(ours, selectors.EVENT_READ, worker)
        theirs.close()
        master.read_messages(worker)
        assert ours not in master.selector.get_map()
        master.read_messages(worker)
    finally:
        ours.close()
        master.selector.close()


def test_a_queued_attempt_a_round_missed_is_lost_and_its_start_stops_the_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A queued attempt runs no code, so a round that finds its lease gone kills nothing; but
    # its worker must never run it: the master stops the worker the moment it starts it.
    master = Master(SupervisorConfig(dsn="postgresql://jobq@db/jobq"))
    stops: list[StopReason] = []
    monkeypatch.setattr(
        master.stopper, "stop", lambda w, reason, now, at_once=False: stops.append(reason)
    )
    ours, theirs = wire.pair()
    mark = SettlingMark()
    process = Forked(pid=2**22 + 1, pidfd=-1, sock=ours)
    slot = FenceTable(1).allocate()
    assert slot is not None
    worker = WorkerProcess(process, mark, [slot], "w1", 0, 0.0, "*")
    try:
        ours.setblocking(False)
        master.selector.register(ours, selectors.EVENT_READ, worker)
        worker.claimed(protocol.attempts([claim(1), claim(2), claim(3)]), now=0.0)
        assert not master.lost(Missed(worker, 2, "token-2"))
        assert list(worker.queued) == [3]
        assert worker.lost == {2}
        assert sorted(lease.claim.id for lease in worker.leases()) == [1, 3]
        assert stops == []
        master.pools.follow(worker)
        assert stops == [], "not started yet"
        # The worker's start of it: its fence slot names it.
        slot.worker.write(Hold(process.pid, 2, token_key("token-2"), 102.0, 1.0))
        master.pools.follow(worker)
        assert stops == [StopReason.LOST]
    finally:
        ours.close()
        theirs.close()
        mark.close()
        master.selector.close()


def test_a_queued_attempt_read_started_from_the_slot_is_vouched_for_at_once() -> None:
    # Renewals extended it while it waited; the fence keeper must see that extension, not
    # only the claim's lease end, from the pass that finds it started.
    master = Master(SupervisorConfig(dsn="postgresql://jobq@db/jobq"))
    slot = FenceTable(1).allocate()
    assert slot is not None
    process = Forked(pid=2**22 + 2, pidfd=-1, sock=cast(socket.socket, None))
    worker = WorkerProcess(process, cast(SettlingMark, None), [slot], "w1", 0, 0.0, "*")
    try:
        worker.claimed(protocol.attempts([claim(1), claim(2)]), now=0.0)
        worker.queued[2].expires = 500.0
        master.pools.follow(worker)
        assert slot.master.read() == EMPTY, "nothing started, nothing vouched"
        slot.worker.write(Hold(process.pid, 2, token_key("token-2"), 102.0, 3.0))
        master.pools.follow(worker)
        vouched = slot.master.read()
        assert vouched is not None
        assert (vouched.job, vouched.expires) == (2, 500.0)
        assert worker.running[2].started == 3.0
    finally:
        master.selector.close()
