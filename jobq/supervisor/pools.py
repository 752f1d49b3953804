"""Every pool of one master: its workers by pid, the fence table they share, the reload
generation, and what the master asks of them all at once (what it vouches for, when it must
act next, keeping each pool's size, a reload's replacements, fencing, burying)."""

from __future__ import annotations

import logging
import os
import time

from ..worker import recycling
from ..worker.fence import FenceTable
from .config import FENCE_SLOTS
from .pool import Pool, describe_exit
from .shared import Shared
from .states import StopReason
from .stopping import Stopper
from .workers import WorkerProcess

log = logging.getLogger("jobq")

# While a worker holds queued attempts, the master reads its fence slot at least this often:
# a queued attempt that starts is vouched for this soon, far within the half lease it has
# left (lease_clock.startable); its job timeout counts from the start the slot gives.
FOLLOW = 0.05
# Exits a worker makes on purpose: they are not restarts in the metrics' sense.
RECYCLED = {
    recycling.EXIT_RECYCLED: None,
    recycling.EXIT_MEMORY: StopReason.MEMORY,
    recycling.EXIT_STRAYS: StopReason.STRAYS,
}


class Pools:
    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.children: dict[int, WorkerProcess] = {}
        # Mapped before any fork, so every process shares it.
        self.fences = FenceTable(FENCE_SLOTS)
        self.stopper = Stopper(shared)
        self.generation = 0
        for spec in shared.config.pool_specs():
            shared.metrics.know_pool(spec.name)
        self.by_name = {
            spec.name: Pool(spec, shared, self.children, self.fences, self.stopper)
            for spec in shared.config.pool_specs()
        }

    @property
    def named(self) -> bool:
        """Whether --pool made them: logs and titles then name each pool."""
        return bool(self.shared.config.pools)

    def described(self) -> str:
        """Their sizes and types, as the start's log line gives them."""
        if not self.named:
            (pool,) = self.by_name.values()
            return f"{pool.target} workers, types {','.join(pool.spec.types) or 'all'}"
        specs = ", ".join(pool.spec.spec for pool in self.by_name.values())
        return f"pools {specs} (types:workers:concurrency)"

    def title(self) -> str:
        """Their workers against their sizes, as the master's process title shows them."""
        if not self.named:
            (pool,) = self.by_name.values()
            types = ",".join(pool.spec.types) or "all types"
            return f"{len(self.children)}/{pool.target} workers [{types}]"
        return " ".join(f"[{p.name}] {len(p.workers())}/{p.target}" for p in self.by_name.values())

    def all(self) -> list[Pool]:
        return list(self.by_name.values())

    def of(self, worker: WorkerProcess) -> Pool:
        return self.by_name[worker.pool]

    def held(self) -> dict[int, tuple[int, str]]:
        """Every attempt the master still vouches for, in every pool: one renewal round
        renews them all. Job id -> (pid, token)."""
        return {
            lease.claim.id: (w.pid, lease.claim.token)
            for w in self.children.values()
            for lease in w.leases()
        }

    def started_unrecorded(self, now: float) -> dict[int, float]:
        """The queued attempts that started since the last renewal round and whose start no
        statement recorded yet: job id -> seconds since it started (see attempts.Attempt)."""
        return {
            lease.claim.id: now - lease.started
            for w in self.children.values()
            for lease in w.running.values()
            if not lease.start_recorded
        }

    def next_due(self, running: bool) -> float:
        """The next moment a worker must be stopped, killed or spawned."""
        due = min((self.stopper.next_due(w) for w in self.children.values()), default=float("inf"))
        if running:
            due = min([due, *(pool.spawn_due() for pool in self.by_name.values())])
        return due

    # -- following their starts -----------------------------------------------------------

    def follow(self, worker: WorkerProcess | None = None) -> None:
        """Learn from their fence slots (or `worker`'s) which queued attempts they started
        (see WorkerProcess.follow): fence each on it with the master's own best known lease
        end (as after a renewal), unless a round found that lease lost: then kill it."""
        for each in list(self.children.values()) if worker is None else [worker]:
            job_id = each.follow()
            if job_id is None:
                continue
            lease = each.running.get(job_id)
            if lease is not None:
                each.vouch(lease)
            elif job_id in each.lost and each.stop_reason is None:
                self.stopper.stop(each, StopReason.LOST, time.monotonic(), at_once=True)
                log.error(
                    "Worker %d started job %d, whose lease a renewal round found lost: killed it",
                    each.pid,
                    job_id,
                    extra={"event": "lost", "job_id": job_id},
                )

    def follow_every(self) -> float:
        """How soon their fence slots must be read again: every pass while a worker holds a
        queued attempt whose lease was lost (it is killed the pass after it starts it),
        every FOLLOW while one holds queued attempts."""
        if any(worker.lost for worker in self.children.values()):
            return 0.0
        return FOLLOW if any(w.queued for w in self.children.values()) else float("inf")

    # -- keeping their sizes ---------------------------------------------------------------

    def manage(self, now: float, patient: bool) -> None:
        """Keep each pool its size; once every one is, go on with a reload's replacements."""
        sized = [pool.resize(now, patient, self.generation) for pool in self.by_name.values()]
        if all(sized):
            self.rotate()

    def rotate(self) -> None:
        """After HUP: replace workers of older generations one at a time, pool by pool in
        the order given, oldest first. Its pool spawns a new one while it drains."""
        if any(w.retiring or not w.ready for w in self.children.values()):
            return
        for pool in self.by_name.values():
            worker = pool.outdated(self.generation)
            if worker is not None:
                self.stopper.retire(worker, "reload")
                return

    def scale(self, name: str | None, change: int) -> str:
        """TTIN (+1) or TTOU (-1) for the pool of that name, or (None, a plain signal) for
        the only pool: with several, a plain signal cannot tell which, and is ignored.
        What was done, in a line."""
        if name is None and len(self.by_name) > 1:
            said = (
                f"TTIN/TTOU ignored: this supervisor runs {len(self.by_name)} pools; resize one "
                "with `jobq-supervise ctl ttin POOL` (or ttou)"
            )
            log.warning(said, extra={"event": "scale"})
            return said
        pool = next(iter(self.by_name.values())) if name is None else self.by_name[name]
        return pool.scale(change)

    def on_ready(self, worker: WorkerProcess) -> None:
        self.of(worker).on_ready(worker)

    def flush(self) -> bool:
        """Send on what the workers' sockets did not take at once; whether some still waits."""
        waiting = False
        for worker in self.children.values():
            if worker.process.outbox.waiting:
                self.stopper.send(worker, None)
                waiting |= bool(worker.process.outbox.waiting)
        return waiting

    # -- stopping --------------------------------------------------------------------------

    def fence(self, now: float) -> None:
        for worker in list(self.children.values()):
            self.stopper.fence(worker, now)

    def stop_all(self, now: float) -> None:
        for worker in self.children.values():
            if worker.stop_reason is None:
                self.stopper.stop(worker, StopReason.SHUTDOWN, now)

    def drain_all(self) -> None:
        for worker in self.children.values():
            self.stopper.retire(worker, "drain")

    # -- burying ---------------------------------------------------------------------------

    def bury(self, worker: WorkerProcess, running: bool) -> tuple[str, bool]:
        """Reap an exited worker whose messages were read, after killing what is left of its
        attempt: how it exited, and whether its attempt's processes are confirmed gone."""
        gone = worker.end_attempt()
        if worker.stop_reason is None and worker.fenced_by_keeper():
            # The master could not vouch for its lease in time, and was late to say so.
            worker.stop_reason = StopReason.SELF_FENCE
            self.shared.metrics.killed.labels(worker.pool, StopReason.SELF_FENCE).inc()
        for slot in worker.slots:
            self.fences.release(slot)
        status = os.waitpid(worker.pid, 0)[1]
        worker.process.close()
        worker.mark.close()
        how = describe_exit(status)
        log.info(
            "Worker %d exited (%s)",
            worker.pid,
            how,
            extra={"event": "worker_exited", "worker": worker.pid, "exit": how},
        )
        self.count_exit(worker, os.waitstatus_to_exitcode(status), running)
        return how, gone

    def count_exit(self, worker: WorkerProcess, code: int, running: bool) -> None:
        if code in RECYCLED:
            reason = RECYCLED[code]
            if reason is not None:
                self.shared.metrics.killed.labels(worker.pool, reason).inc()
        elif running and not worker.retiring and worker.stop_reason is None:
            # Died on its own (a crash, or it could not start); the master's own kills are
            # counted by reason in jobq_workers_killed_total.
            self.shared.metrics.restarts.labels(worker.pool).inc()

    def crash_looping(self, worker: WorkerProcess, how: str, running: bool) -> bool:
        return self.of(worker).crash_looping(worker, how, running)
