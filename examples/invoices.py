"""The workflows guide's jobs: price each line of an invoice, then total it; export a
report's parts as a batch, then email it. In a module, so that workers can import them:
`jobq work --app invoices` from this folder runs them too."""

from __future__ import annotations

import jobq


class PriceLine(jobq.Job):
    type = "invoices"

    def __init__(self, invoice: int, line: int) -> None:
        self.invoice = invoice
        self.line = line

    def handle(self) -> int:
        return 100 * self.line  # the line's price in cents, stored as the job's result


class TotalInvoice(jobq.Job):
    """Runs once every line is priced: it reads its parents' results."""

    type = "invoices"

    def __init__(self, invoice: int, dsn: str | None = None) -> None:
        self.invoice = invoice
        self.dsn = dsn

    def handle(self) -> int:
        claim = jobq.current_claim()
        assert claim is not None
        with jobq.Queue.connect(self.dsn) as queue:
            parents = [queue.get(parent) for parent in claim.parents]
        prices = [record.result for record in parents if record is not None]
        total = sum(prices)
        print(f"invoice {self.invoice}: {len(prices)} lines, {total} cents")
        return total


# The part that fails, so that the batch's `then` job shows it runs whatever the outcomes.
CORRUPT = 3


class ExportPart(jobq.Job):
    type = "invoices"

    def __init__(self, part: int) -> None:
        self.part = part

    def handle(self) -> None:
        if self.part == CORRUPT:
            raise RuntimeError(f"part {self.part} is corrupt")


class EmailReport(jobq.Job):
    """A batch's `then` job: it runs whatever the parts' outcomes, and reads their counts.
    Its own id is the batch's."""

    type = "invoices"

    def __init__(self, dsn: str | None = None) -> None:
        self.dsn = dsn

    def handle(self) -> dict[str, int]:
        claim = jobq.current_claim()
        assert claim is not None
        with jobq.Queue.connect(self.dsn) as queue:
            counts = queue.batch_status(claim.id)
        print(f"report: {counts['completed']} parts exported, {counts['failed']} failed")
        return counts
