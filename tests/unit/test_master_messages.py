"""The master's reading of a worker's socket, in process: no worker is forked."""

from __future__ import annotations

import selectors
from types import SimpleNamespace
from typing import cast

from jobq import protocol
from jobq.supervisor.config import SupervisorConfig
from jobq.supervisor.master import Master
from jobq.supervisor.workers import WorkerProcess


def test_a_worker_read_again_after_it_closed_its_socket_leaves_the_master_running() -> None:
    # A worker that closed its end is not reaped at once (its attempt may still be killed);
    # a renewal round that missed it meanwhile reads its socket once more.
    master = Master(SupervisorConfig(dsn="postgresql://jobq@db/jobq"))
    ours, theirs = protocol.pair()
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
