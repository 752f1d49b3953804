"""Enqueue four jobs, then run them under jobq-supervise, on the embedded SQLite default (or
JOBQ_DSN if set):

python examples/quickstart.py

jobq-supervise is a master process that forks workers and renews the lease of every job they
run: the umbrella report takes 8 s on a 6 s lease, and still runs once. --exit-when-empty makes
it drain and exit once no job is ready or running, as a Kubernetes Job or a CI step would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from reports import BuildReport  # beside this script: job classes live in importable modules

import jobq

HERE = Path(__file__).resolve().parent
LEASE = 6  # seconds: short, so that the umbrella report outlives it


def main() -> None:
    with jobq.Queue.connect() as queue:
        queue.install()
        ids = [queue.enqueue(BuildReport(name, "2026-11")) for name in ("acme", "globex")]
        ids.append(queue.enqueue(BuildReport("umbrella", "2026-11", seconds=8)))
        print(f"enqueued jobs {', '.join(map(str, ids))}", flush=True)
        supervise()
        for job_id in ids:
            show(queue, job_id)


def supervise() -> None:
    """Run the supervisor as you would in a terminal, from this folder's modules."""
    command = ["--app", "reports", "--workers", "2", "--lease", str(LEASE), "--exit-when-empty"]
    print(f"$ jobq-supervise {' '.join(command)}", flush=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    subprocess.run([sys.executable, "-m", "jobq.supervisor", *command], env=env, check=True)


def show(queue: jobq.Queue, job_id: int) -> None:
    job = queue.get(job_id)
    assert job is not None
    assert job.finished_at is not None
    assert job.started_at is not None
    took = (job.finished_at - job.started_at).total_seconds()
    print(
        f"job {job.id} {job.status} in {job.attempts} attempt(s), {took:.1f} s "
        f"on a {LEASE} s lease: {job.result}"
    )


if __name__ == "__main__":
    main()
