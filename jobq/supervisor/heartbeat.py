"""The node's heartbeat: every few seconds the master tells its housekeeper what it knows
(its pools, its workers and the attempts they run, its helpers' health), and the
housekeeper writes it to the node's row in jobq_nodes (backends/nodes.py), for `jobq nodes`
and the status page. The master holds no connection of its own: the row is as fresh as the
housekeeper, and a node whose row is not written any more shows as silent."""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any

from .. import __version__, protocol
from .helpers import Helpers
from .pools import Pools
from .shared import Shared
from .states import Helper
from .workers import WorkerProcess

# Seconds between two heartbeats. A reader calls a node silent once its row is older than
# a few of these (queue/nodes.py).
EVERY = 5.0
# A row not written for this long is deleted, by any node's next heartbeat: a node that
# stopped or died stays listed, as silent, for an hour.
RETENTION = 3600.0


class Heartbeats:
    def __init__(self, shared: Shared, pools: Pools, helpers: Helpers) -> None:
        self.shared = shared
        self.pools = pools
        self.helpers = helpers
        self.host = socket.gethostname()
        self.pid = os.getpid()
        # A pid is reused, across reboots or containers: the start time tells two apart.
        self.node = f"{self.host}:{self.pid}:{time.time():.0f}"
        self.next_at = 0.0

    def due(self) -> float:
        return self.next_at

    def tend(self, now: float, last: bool = False) -> None:
        """Send a heartbeat when one is due and the housekeeper runs: one that is missing
        gets none held for it (a stale view is worth nothing), and the row goes silent.
        `last`: the master stops, and says so before its housekeeper drains, so that its
        row reads stopped, not silent."""
        if now < self.next_at and not last:
            return
        self.next_at = now + EVERY
        # Nor while the helpers' last database work failed: a beat would fail too, and log
        # so every 5 s of an outage. The node reads silent then, which to readers it is.
        if Helper.HOUSEKEEPER not in self.helpers.processes or self.helpers.database_problem:
            return
        facts = json.dumps(self.facts(now), separators=(",", ":"))
        beat = protocol.Heartbeat(self.node, self.host, self.pid, __version__, facts, RETENTION)
        self.helpers.tell(Helper.HOUSEKEEPER, beat)

    def facts(self, now: float) -> dict[str, Any]:
        pools = [
            {
                "name": pool.name,
                "types": list(pool.spec.types),
                "workers": pool.target,
                "concurrency": pool.spec.concurrency,
            }
            for pool in self.pools.all()
        ]
        workers = [worker_facts(w, now) for w in sorted(self.pools.children.values(), key=pid)]
        return {
            "phase": str(self.shared.phase),
            "pools": pools,
            "workers": workers,
            "helpers": self.helpers.problems(),
        }


def pid(worker: WorkerProcess) -> int:
    return worker.pid


def worker_facts(worker: WorkerProcess, now: float) -> dict[str, Any]:
    """A worker and its running attempts, each with the seconds its lease certainly lasts
    by the master's reckoning (the row's lease_until may be later)."""
    running = [
        {"id": lease.claim.id, "type": lease.claim.type, "lease_left": lease.expires - now}
        for lease in sorted(worker.running.values(), key=lambda lease: lease.claim.id)
    ]
    return {
        "pid": worker.pid,
        "id": worker.worker_id,
        "pool": worker.pool,
        "state": str(worker.state),
        "jobs": worker.jobs,
        "queued": len(worker.queued),
        "running": running,
    }
