"""The process id kept across forks: a child forked from a process that read it has its own."""

from __future__ import annotations

import os

from jobq.pid import getpid


def test_a_forked_child_has_its_own_pid_not_its_parent_s() -> None:
    assert getpid() == os.getpid()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        os.write(write, f"{getpid()} {os.getpid()}".encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        seen, actual = map(int, pipe.read().split())
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert seen == actual == child
    assert getpid() == os.getpid()
