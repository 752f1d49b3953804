"""--exit-when-empty: the master drains and exits 0 once its work is done, as pgqueuer's
drain mode does, for Kubernetes Jobs, CI and one-off backfills.

Done means, at one moment of the database (one statement, Backend.work_left): no job of the
supervisor's types is ready (paused types, jobs blocked on a limit and jobs scheduled later
do not count) and none is in progress on any of its workers. The master asks the housekeeper
only while every worker is ready and holds no attempt, so a job the last attempts enqueued
(a workflow's next step, a batch's `then`) is ready by then and keeps it going; a claim the
master has not heard of yet shows in progress, on a worker of its own.
"""

from __future__ import annotations

import logging
import time

from .. import protocol
from .helpers import Helpers
from .pools import Pools
from .shared import Shared
from .states import Helper, Phase

log = logging.getLogger("jobq")


class Emptying:
    def __init__(self, shared: Shared, pools: Pools, helpers: Helpers) -> None:
        self.shared = shared
        self.pools = pools
        self.helpers = helpers
        self.asked = False
        # At most one question a poll interval: the workers' own pace of looking for work.
        self.next_ask = 0.0

    def types(self) -> list[str]:
        """Its pools' types; none (every type) when a pool takes every type or all others."""
        specs = self.shared.config.pool_specs()
        if any(not spec.types or spec.others for spec in specs):
            return []
        return sorted({job_type for spec in specs for job_type in spec.types})

    def idle(self) -> bool:
        workers = list(self.pools.children.values())
        return bool(workers) and not any(w.busy or not w.ready or w.retiring for w in workers)

    def tend(self, now: float) -> None:
        """Ask the housekeeper whether work is left, when it is time to."""
        if not self.shared.config.exit_when_empty or self.asked or now < self.next_ask:
            return
        if self.shared.phase is not Phase.RUNNING or not self.idle():
            return
        # Dead workers' attempts still to settle may put jobs back: ask once they are.
        if self.helpers.unsettled or Helper.HOUSEKEEPER not in self.helpers.processes:
            return
        workers = [w.worker_id for w in self.pools.children.values()]
        self.helpers.tell(Helper.HOUSEKEEPER, protocol.MeasureWork(self.types(), workers))
        self.asked = True

    def done(self, left: bool) -> bool:
        """The housekeeper's answer: whether to drain now."""
        self.asked = False
        self.next_ask = time.monotonic() + self.shared.config.poll_interval
        if left or self.shared.phase is not Phase.RUNNING or not self.idle():
            return False
        log.info(
            "No job of its types is ready or running: draining to exit (--exit-when-empty)",
            extra={"event": "empty"},
        )
        return True
