"""One pool: a set of job types with workers of its own (see pool_specs.py), and the rules
that keep it the size it should be: spawn, retire, pick the next to replace after a reload,
back off from a crash loop. What all pools share (the fence table, the reload generation,
the workers by pid, how a worker is stopped) is pools.py's and stopping.py's."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import selectors
import signal
import time
from collections.abc import Iterable

import psutil

from ..pool_specs import PoolSpec
from ..queue.running import new_worker_id
from ..worker import child, kinds
from ..worker.fence import FenceTable
from ..worker.mark import SettlingMark
from .forking import fork
from .shared import Shared
from .stopping import Stopper, of_pool
from .workers import WorkerProcess

log = logging.getLogger("jobq")

# This many children of a pool in a row exiting before they were ready is a crash loop.
CRASH_LOOP_LIMIT = 5
MAX_SPAWN_BACKOFF = 10.0


def resident_memory(workers: Iterable[WorkerProcess]) -> list[int]:
    """Each live worker's resident set size, in bytes."""
    found = []
    for worker in workers:
        with contextlib.suppress(psutil.Error):
            found.append(psutil.Process(worker.pid).memory_info().rss)
    return found


def describe_exit(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    return f"exit code {code}" if code >= 0 else f"signal {signal.Signals(-code).name}"


class Pool:
    def __init__(
        self,
        spec: PoolSpec,
        shared: Shared,
        children: dict[int, WorkerProcess],
        fences: FenceTable,
        stopper: Stopper,
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.shared = shared
        self.target = spec.workers
        self.children = children  # every pool's, by pid: this pool's carry its name
        self.fences = fences
        self.stopper = stopper
        self.startup_failures = 0
        self.fork_failures = 0  # in a row: spawning backs off
        self.next_spawn_at = 0.0

    def workers(self) -> list[WorkerProcess]:
        return [w for w in self.children.values() if w.pool == self.name]

    def active_count(self) -> int:
        return sum(1 for w in self.workers() if not w.retiring and w.stop_reason is None)

    def spawn_due(self) -> float:
        """When it spawns next, if it is short of workers."""
        return self.next_spawn_at if self.active_count() < self.target else float("inf")

    # -- keeping its size ------------------------------------------------------------------

    def resize(self, now: float, patient: bool, generation: int) -> bool:
        """Spawn or retire one worker if the pool is not its size; whether it was
        (`patient`: new workers wait out a database outage, as the database answered before)."""
        active = self.active_count()
        if active < self.target:
            if now >= self.next_spawn_at:
                self.spawn(patient, generation)
            return False
        if active > self.target:
            self.stopper.retire(self.pick_to_retire(), "pool size")
            return False
        return True

    def pick_to_retire(self) -> WorkerProcess:
        """An idle child if there is one, else the youngest: the least work is lost."""
        candidates = [w for w in self.workers() if not w.retiring and not w.stop_reason]
        return min(candidates, key=lambda w: (w.busy, -w.spawned))

    def outdated(self, generation: int) -> WorkerProcess | None:
        """Its oldest worker of a generation before `generation` (a reload's), if any."""
        old = [w for w in self.workers() if w.generation < generation]
        return min(old, key=lambda w: w.spawned, default=None)

    def scale(self, change: int) -> str:
        """TTIN (+1) or TTOU (-1): a pool keeps at least one worker. What was done."""
        which = f" (pool {self.name})" if self.shared.config.pools else ""
        if self.target + change < 1:
            said = f"Pool size stays 1: a pool has at least one worker{which}"
        else:
            self.target += change
            said = f"Pool size now {self.target}{which}"
        log.info(said, extra={"event": "scale", "pool": self.name})
        return said

    def spawn(self, patient: bool, generation: int) -> None:
        # Chosen here, before the fork: the master knows whose rows to settle even if the
        # child dies before its first message.
        worker_id = new_worker_id()
        # The pool's size as it stands (ctl ttin/ttou change it), for the worker's share
        # of the limited work.
        settings = dataclasses.replace(
            self.shared.config.worker_settings(self.spec),
            patient=patient,
            worker_id=worker_id,
            workers=self.target,
        )
        slots = self.fences.allocate_many(settings.concurrency)
        if slots is None:
            log.error("Cannot run more than %d attempts at once", self.fences.capacity)
            self.next_spawn_at = time.monotonic() + MAX_SPAWN_BACKOFF
            return
        mark = SettlingMark()
        try:
            process = fork(
                lambda sock: child.run(kinds.worker_for(settings, sock, mark, slots)),
                self.shared.let_go,
            )
        except OSError as error:
            # EAGAIN under a pids limit: an outage, waited out; the running workers go on.
            for slot in slots:
                self.fences.release(slot)
            mark.close()
            self.fork_failures += 1
            backoff = min(MAX_SPAWN_BACKOFF, 0.1 * 2**self.fork_failures)
            self.next_spawn_at = time.monotonic() + backoff
            log.error(
                "Cannot start a worker: %s; trying again in %.1f s",
                error,
                backoff,
                extra={"event": "fork_failed"},
            )
            return
        self.fork_failures = 0
        now = time.monotonic()
        worker = WorkerProcess(process, mark, slots, worker_id, generation, now, self.name)
        self.children[process.pid] = worker
        self.shared.selector.register(process.sock, selectors.EVENT_READ, worker)
        log.info(
            "Spawned worker %d%s",
            process.pid,
            of_pool(self.shared.config, self.name),
            extra={"event": "spawned", "worker": process.pid, "pool": self.name},
        )

    def on_ready(self, worker: WorkerProcess) -> None:
        worker.ready = True
        self.startup_failures = 0
        log.info("Worker %d ready", worker.pid, extra={"event": "ready"})
        if worker.retiring:
            self.stopper.tell_drain(worker)

    def crash_looping(self, worker: WorkerProcess, how: str, running: bool) -> bool:
        """Count a worker that exited before it was ready, and back off spawning; whether
        the supervisor should stop: too many of this pool's did in a row."""
        if worker.ready or worker.stop_reason is not None:
            return False
        self.startup_failures += 1
        looping = self.startup_failures >= CRASH_LOOP_LIMIT and running
        if looping:
            log.error(
                "Workers%s keep exiting before they are ready (%d in a row, the last with %s):"
                " stopping. The workers' log above says why; check the DSN and --app.",
                of_pool(self.shared.config, self.name),
                self.startup_failures,
                how,
                extra={"event": "crash_loop", "pool": self.name},
            )
        backoff = min(MAX_SPAWN_BACKOFF, 0.1 * 2**self.startup_failures)
        self.next_spawn_at = time.monotonic() + backoff
        return looping
