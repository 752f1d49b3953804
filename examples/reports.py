"""The quick start's job. It lives in a module, not in the script that enqueues it, so that
workers can import it: `jobq-supervise --app reports` from this folder runs it."""

from __future__ import annotations

import time

import jobq


class BuildReport(jobq.Job):
    type = "reports"

    def __init__(self, customer: str, month: str, seconds: float = 0.0) -> None:
        self.customer = customer
        self.month = month
        self.seconds = seconds  # how long building it takes

    def handle(self) -> dict[str, str]:
        time.sleep(self.seconds)
        print(f"built the {self.month} report for {self.customer}", flush=True)
        # What handle() returns is stored with the completed job: Queue.wait() and
        # `jobq show` give it back.
        return {"customer": self.customer, "file": f"{self.customer}-{self.month}.pdf"}
