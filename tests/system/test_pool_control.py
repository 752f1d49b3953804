"""The master's control socket in process: `jobq-supervise ctl` resizes a named pool, lists
the pools, and is refused what it cannot do. No worker is forked (no pool is managed)."""

from __future__ import annotations

import selectors
import socket
from collections.abc import Iterator

import pytest

from jobq.cli import ctl
from jobq.pool_specs import PoolSpec
from jobq.supervisor.config import SupervisorConfig
from jobq.supervisor.control import Control
from jobq.supervisor.master import Master


@pytest.fixture
def master() -> Iterator[Master]:
    pools = (PoolSpec(("import",), 2), PoolSpec(("email", "sms"), 1, 5), PoolSpec((), 1))
    master = Master(SupervisorConfig(dsn="postgresql://jobq@db/jobq", pools=pools))
    try:
        yield master
    finally:
        master.selector.close()


def told(control: Control, line: str, end: bytes = b"\n") -> str:
    """What the master answers `line`, its loop's events played by hand; without `end`, the
    client closes its side instead."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(control.listener.sock.getsockname())
        client.sendall(line.encode() + end)
        if not end:
            client.shutdown(socket.SHUT_WR)
        control.on_event(selectors.EVENT_READ)
        for _ in range(3):  # the line, then (without `end`) its end
            if not control.connections:
                break
            for key, mask in control.selector.select(1.0):
                if key.data is not control:
                    key.data.on_event(mask)
        assert not control.connections  # answered and closed
        return client.recv(4096).decode().rstrip("\n")


def test_a_named_pool_grows_and_shrinks_and_keeps_one_worker(master: Master) -> None:
    control = Control(master.selector, master.pools, lambda: None)
    try:
        assert told(control, "ttin email,sms") == "Pool size now 2 (pool email,sms)"
        assert told(control, "ttou *") == (
            "Pool size stays 1: a pool has at least one worker (pool *)"
        )
        assert told(control, "ttou import") == "Pool size now 1 (pool import)"
        assert told(control, "pools") == "import 0/1\nemail,sms 0/2\n* 0/1"
        assert told(control, "pools", end=b"") == "import 0/1\nemail,sms 0/2\n* 0/1"
        assert told(control, "ttin nope") == (
            "refused: no pool 'nope': the pools are 'import', 'email,sms', '*'"
        )
        assert told(control, "grow import").startswith("refused: unknown command 'grow import'")
    finally:
        control.close()


def test_a_plain_signal_cannot_tell_which_of_several_pools(master: Master) -> None:
    master.handle_ttin()
    assert [pool.target for pool in master.pools.all()] == [2, 1, 1]


def test_ctl_names_a_pool_after_ttin_and_ttou_only(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["ttin"], ["pools", "import"]):
        with pytest.raises(SystemExit):
            ctl.main([*argv, "--master", "1"])
        assert "give a pool's name after ttin or ttou" in capsys.readouterr().err
