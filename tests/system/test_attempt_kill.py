"""The pieces the fence is built of, with real processes and shared memory, no database:
the fence table across a fork, and killing an attempt's every process."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psutil

from jobq.supervisor.keeper import Keeper
from jobq.worker import attempt
from jobq.worker.fence import FenceTable, Hold, token_key
from tests.support.supervising import alive
from tests.support.waiting import wait_for


def zombies(parent: int) -> bool:
    return any(
        child.status() == psutil.STATUS_ZOMBIE for child in psutil.Process(parent).children()
    )


def test_a_hold_a_forked_worker_writes_is_what_the_keeper_reads() -> None:
    table = FenceTable(4)
    slot = table.allocate()
    assert slot is not None
    hold = Hold(123, 2**40 + 7, token_key("token"), 1234.5)
    pid = os.fork()
    if pid == 0:
        slot.worker.write(hold)
        os._exit(0)
    os.waitpid(pid, 0)
    assert slot.worker.read() == hold
    # The master's extension of the same attempt moves the kill point; another's does not.
    keeper = Keeper(table, safety_margin=1.0)
    slot.master.write(Hold(123, hold.job, hold.token, 2000.0))
    assert [point for _, _, point in keeper.held()] == [2000.0 - 1.0 - 0.1]
    slot.master.write(Hold(123, hold.job, token_key("another"), 3000.0))
    assert [point for _, _, point in keeper.held()] == [1234.5 - 1.0 - 0.1]


@contextmanager
def fake_worker() -> Iterator[int]:
    """A process leading its own group, as a worker does, that starts a subprocess in its
    group and a setsid daemon that left it, both carrying its attempt's mark."""
    started_r, started_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            attempt.mark()
            subprocess.Popen(["sleep", "60"])
            subprocess.Popen(["sleep", "61"], start_new_session=True)
            os.write(started_w, b"x")
            time.sleep(60)
        finally:
            os._exit(0)
    os.read(started_r, 1)
    os.close(started_r)
    os.close(started_w)
    try:
        yield pid
    finally:
        attempt.kill(pid)
        os.waitpid(pid, 0)


def test_killing_an_attempt_kills_its_group_and_its_marked_escapees() -> None:
    with fake_worker() as worker:
        members = wait_for(
            "the fake worker's processes", lambda: sorted(attempt.members(worker)) or None
        )
        assert len(members) == 3, members  # the worker, the subprocess, the daemon
        assert worker in members
        assert attempt.kill_and_confirm(worker, timeout=5)
        assert not any(alive(pid) for pid in members if pid != worker), members


def test_a_worker_finds_and_kills_its_own_leftovers_but_not_itself() -> None:
    result_r, result_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            attempt.mark()
            leftovers = attempt.Leftovers(os.getppid())
            # A child that exited but was never waited for is no leftover.
            exited = subprocess.Popen(["true"])
            wait_for("the zombie", lambda: zombies(os.getpid()))
            before = leftovers.found()
            subprocess.Popen(["sleep", "60"])
            found = leftovers.found()
            killed = attempt.kill_and_confirm(os.getpid(), timeout=5)
            os.write(result_w, bytes([before, found, killed]))
            exited.wait()
        finally:
            os._exit(0)
    try:
        assert os.read(result_r, 3) == bytes([False, True, True])
    finally:
        os.waitpid(pid, 0)
        os.close(result_r)
        os.close(result_w)


def test_a_children_file_held_open_lists_the_children_as_they_are_at_each_read() -> None:
    # The leftover check keeps the master's children file open and reads it again per attempt.
    me = os.getpid()
    fd = os.open(f"/proc/{me}/task/{me}/children", os.O_RDONLY)
    try:
        child = subprocess.Popen(["sleep", "60"])
        try:
            assert str(child.pid).encode() in attempt.reread(fd).split()
        finally:
            child.kill()
            child.wait(timeout=10)
        assert str(child.pid).encode() not in attempt.reread(fd).split()
    finally:
        os.close(fd)
