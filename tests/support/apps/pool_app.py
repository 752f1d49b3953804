"""An application whose workers start a process pool and a sidecar in on_worker_start, as the
README suggests, and a job that leaves a process of its own behind.

Loaded by workers as `pool_app`; POOL_JOURNAL names the journal each job writes to.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from multiprocessing.pool import Pool

import jobq

# Runs until its parent, the worker, is gone: nothing outlives the test.
WHILE_PARENT = "import os, time\np = os.getppid()\nwhile os.getppid() == p: time.sleep(0.05)"

pool: Pool | None = None
sidecar: subprocess.Popen[bytes] | None = None


def write(entry: dict[str, object]) -> None:
    with open(os.environ["POOL_JOURNAL"], "a") as journal:
        journal.write(json.dumps({"worker": os.getpid(), **entry}) + "\n")


@jobq.on_worker_start
def start_helpers() -> None:
    global pool, sidecar
    pool = multiprocessing.get_context("fork").Pool(2)
    sidecar = subprocess.Popen([sys.executable, "-c", WHILE_PARENT])


class UsePool(jobq.Job):
    job_name = "UsePool"

    def handle(self) -> None:
        assert pool is not None
        assert sidecar is not None
        answered = {pool.apply_async(os.getpid).get(timeout=20) for _ in range(4)}
        current = jobq.current_claim()
        assert current is not None
        write(
            {
                "job": current.id,
                "pool": sorted(process.pid for process in pool._pool),  # type: ignore[attr-defined]
                "answered": sorted(answered),
                "sidecar": sidecar.pid,
                "sidecar_running": sidecar.poll() is None,
            }
        )


class LeaveBehind(jobq.Job):
    job_name = "LeaveBehind"

    def handle(self) -> None:
        subprocess.Popen([sys.executable, "-c", WHILE_PARENT])
