"""What a forked child of the master inherits of its heap is frozen out of the child's
garbage collections (gc.freeze before the fork), and the master takes its own back."""

from __future__ import annotations

import gc
import os
import socket

from jobq.supervisor.forking import fork


def report_freeze_count(sock: socket.socket) -> int:
    sock.setblocking(True)
    sock.send(str(gc.get_freeze_count()).encode())
    return 0


def test_a_child_inherits_the_master_s_heap_frozen_and_the_master_keeps_its_own() -> None:
    assert gc.get_freeze_count() == 0
    child = fork(report_freeze_count, lambda: None)
    try:
        child.sock.setblocking(True)
        child.sock.settimeout(10)
        frozen = int(child.sock.recv(64))
        assert os.waitpid(child.pid, 0)[1] == 0
    finally:
        child.close()
    assert frozen > 0, "the child's inherited objects are frozen"
    assert gc.get_freeze_count() == 0, "the master collects its own heap as before"
