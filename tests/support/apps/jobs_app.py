"""A small application for the command-line tests: `jobq work --app jobs_app` imports it.

Each class sets job_name explicitly: the worker imports this file as `jobs_app`, while the tests
may import it as `tests.support.apps.jobs_app`, and both must agree on the names stored with
the jobs.
"""

from __future__ import annotations

import time
from pathlib import Path

import jobq

# A job waiting for the test to release it gives up after this long, so no run can hang.
RELEASE_TIMEOUT = 30.0


class AppendLine(jobq.Job):
    """Appends its line to a file: the file is the record of which jobs ran, and in what order."""

    job_name = "jobs_app.AppendLine"
    type = "append"

    def __init__(self, path: str, line: str) -> None:
        self.path = path
        self.line = line

    def handle(self) -> None:
        with open(self.path, "a", encoding="utf-8") as file:
            file.write(self.line + "\n")


class WaitForRelease(jobq.Job):
    """Marks that it started, then runs until the test creates the release file.

    Waiting on a file the test controls, rather than sleeping, lets a test act while the job is
    certainly still running.
    """

    job_name = "jobs_app.WaitForRelease"
    type = "slow"

    def __init__(self, started: str, release: str, done: str) -> None:
        self.started = started
        self.release = release
        self.done = done

    def handle(self) -> None:
        Path(self.started).write_text("started", encoding="utf-8")
        deadline = time.monotonic() + RELEASE_TIMEOUT
        while not Path(self.release).exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.release} was not created in {RELEASE_TIMEOUT} s")
            time.sleep(0.01)
        Path(self.done).write_text("done", encoding="utf-8")


class Explode(jobq.Job):
    job_name = "jobs_app.Explode"
    type = "explode"

    def __init__(self, message: str) -> None:
        self.message = message

    def handle(self) -> None:
        raise RuntimeError(self.message)
