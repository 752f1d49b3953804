"""The settling mark is two words of memory a worker and its master both see, across the fork."""

from __future__ import annotations

import os

from jobq.worker.mark import SettlingMark


def test_a_mark_a_forked_child_writes_is_what_its_parent_reads() -> None:
    mark = SettlingMark()
    assert not mark.settling(2**40 + 7, "token-a")
    to_parent_r, to_parent_w = os.pipe()
    to_child_r, to_child_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(to_child_w)
            mark.set(2**40 + 7, "token-a")  # an id wider than 32 bits
            os.write(to_parent_w, b"set")
            os.read(to_child_r, 1)
            mark.clear()
            os.write(to_parent_w, b"clr")
        finally:
            os._exit(0)
    try:
        assert os.read(to_parent_r, 3) == b"set"
        assert mark.settling(2**40 + 7, "token-a")
        # Keyed on the attempt: the same job under another token is not being settled.
        assert not mark.settling(2**40 + 7, "token-b")
        assert not mark.settling(7, "token-a")
        os.write(to_child_w, b"x")
        assert os.read(to_parent_r, 3) == b"clr"
        assert not mark.settling(2**40 + 7, "token-a")
    finally:
        os.close(to_child_w)  # a child still waiting to clear the mark reads EOF and exits
        os.waitpid(pid, 0)
        mark.close()
        for fd in (to_parent_r, to_parent_w, to_child_r):
            os.close(fd)
