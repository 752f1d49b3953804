"""Jobs that wait for other jobs, and a batch with a `then` job, on the embedded SQLite
default (or JOBQ_DSN if set). See docs/guides/workflows.md.

python examples/workflows.py
"""

from __future__ import annotations

import os

from invoices import EmailReport, ExportPart, PriceLine, TotalInvoice  # beside this script

import jobq

ONCE = jobq.RetryPolicy(max_attempts=1)


def main() -> None:
    dsn = os.environ.get("JOBQ_DSN")
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        # Fan out, then fan in: the total waits for every line.
        lines = queue.enqueue_many([PriceLine(42, line) for line in (1, 2, 3)])
        total = queue.enqueue(TotalInvoice(42, dsn), after=lines)
        print(f"total job {total}: {queue.counts()}")

        # A batch: the email goes once every part has ended, whatever its outcome.
        with queue.batch(then=EmailReport(dsn)) as batch:
            batch.enqueue_many([ExportPart(part) for part in (1, 2, 3)], retry=ONCE)
        print(f"batch {batch.id}: {queue.batch_status(batch.id)['pending']} parts pending")

        queue.process_jobs(20, type="invoices")
        print(f"the queue now holds {queue.counts()}")


if __name__ == "__main__":
    main()
