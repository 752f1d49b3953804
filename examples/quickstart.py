"""Enqueue a few jobs and run them, on the embedded SQLite default (or JOBQ_DSN if set).

python examples/quickstart.py
"""

from __future__ import annotations

import logging

from reports import BuildReport  # beside this script: job classes live in importable modules

import jobq


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    with jobq.Queue.connect(lease_duration=60) as queue:
        queue.install()
        ids = [
            queue.enqueue(BuildReport(customer, "2026-11"), retry=jobq.RetryPolicy(max_attempts=3))
            for customer in ("acme", "globex", "initech")
        ]
        ran = queue.process_jobs(10, type="reports")
        print(f"ran {ran} job(s); the queue now holds {queue.counts()}")
        # A worker in another process would finish them; here they are done already.
        first = queue.wait(ids[0], timeout=30)
        print(f"job {first.id} is {first.status}, its result: {first.result}")


if __name__ == "__main__":
    main()
