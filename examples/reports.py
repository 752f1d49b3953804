"""The quick start's job. It lives in a module, not in the script that enqueues it, so that
workers can import it: `jobq work --app reports` from this folder runs it too."""

from __future__ import annotations

import jobq


class BuildReport(jobq.Job):
    type = "reports"

    def __init__(self, customer: str, month: str) -> None:
        self.customer = customer
        self.month = month

    def handle(self) -> dict[str, str]:
        print(f"built the {self.month} report for {self.customer}")
        # What handle() returns is stored with the completed job: Queue.wait() and
        # `jobq show` give it back.
        return {"customer": self.customer, "file": f"{self.customer}-{self.month}.pdf"}
