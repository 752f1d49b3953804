"""What the master's endpoint answers: /metrics, /healthz and /readyz."""

from __future__ import annotations

import collections
import time

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .. import protocol
from ..dsn import scrub
from .endpoint import Endpoint, Response, plain
from .helpers import Helpers
from .metrics import PoolFigures
from .pool import resident_memory
from .pools import Pools
from .shared import Shared
from .states import Helper, Phase
from .workers import WorkerProcess


def pool_figures(workers: list[WorkerProcess]) -> PoolFigures:
    ready = [w for w in workers if w.ready]
    busy = sum(len(w.running) for w in ready)
    slots = (busy, sum(len(w.slots) for w in ready) - busy)
    return collections.Counter(w.state for w in workers), slots


class Probes:
    def __init__(self, shared: Shared, pools: Pools, helpers: Helpers) -> None:
        self.shared = shared
        self.pools = pools
        self.helpers = helpers

    def serve(self) -> Endpoint:
        config = self.shared.config
        assert config.metrics_port is not None
        routes = {"/metrics": self.scrape, "/healthz": self.health, "/readyz": self.readiness}
        holds = {"/metrics": self.measure_depth}
        failed = self.shared.metrics.accept_errors.labels("metrics").inc
        return Endpoint(
            self.shared.selector, config.metrics_address, config.metrics_port, routes, holds, failed
        )

    def measure_depth(self) -> bool:
        """Before a scrape: whether to wait for fresh queue-depth figures (asked for here)."""
        depth, now = self.shared.metrics.depth, time.monotonic()
        present = Helper.HOUSEKEEPER in self.helpers.processes
        if present and depth.ask(now):
            self.helpers.tell(Helper.HOUSEKEEPER, protocol.MeasureDepth())
        return present and depth.stale(now)

    def scrape(self) -> Response:
        metrics = self.shared.metrics
        figures = {pool.name: pool_figures(pool.workers()) for pool in self.pools.all()}
        metrics.on_workers(figures, resident_memory(self.pools.children.values()))
        return 200, CONTENT_TYPE_LATEST, generate_latest(metrics.registry)

    def health(self) -> Response:
        """Alive: the master's loop answered, and each of its helpers runs. A helper that
        cannot be started again is an outage of the whole node: the orchestrator restarts
        it (the keeper outlives the master long enough to kill what its workers run)."""
        problems = self.helpers.problems()
        return plain(503, *problems) if problems else plain(200, "ok")

    def readiness(self) -> Response:
        problems = []
        if self.shared.phase is not Phase.RUNNING:
            problems.append(f"the supervisor is {self.shared.phase}")
        if not any(w.ready and not w.retiring for w in self.pools.children.values()):
            problems.append("no worker is ready")
        problem = self.helpers.database_problem
        if problem is not None:
            problems.append(f"database: {scrub(problem, self.shared.config.dsn)}")
        return plain(503, *problems) if problems else plain(200, "ready")
