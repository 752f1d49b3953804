"""Jobs for tests that run real supervisors. Each attempt journals its start and end.

Loaded by the workers as `supervised_app` (the tests put this folder on PYTHONPATH), so every
class names itself explicitly.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import jobq
from jobq.testing.history import journal_attempt

# When this module was (re)imported: a worker forked after a HUP runs freshly imported code.
IMPORTED = time.monotonic()
# A slow application import, so a test can look at the master while it is still importing.
time.sleep(float(os.environ.get("SUPERVISED_APP_IMPORT_DELAY", "0")))


def controlled_import(control: Path) -> None:
    """What a test wrote in the file SUPERVISED_APP_IMPORT_CONTROL since the start, e.g. a
    slow or failing import for a later HUP: {"delay": seconds, "fail": true}. Every import
    that reads it says so in `<file>.seen`."""
    if not control.exists():
        return
    orders = json.loads(control.read_text())
    with open(f"{control}.seen", "a") as seen:
        seen.write(f"{os.getpid()}\n")
    time.sleep(float(orders.get("delay", 0)))
    if orders.get("fail"):
        raise RuntimeError("supervised_app was told to fail its import")


if os.environ.get("SUPERVISED_APP_IMPORT_CONTROL"):
    controlled_import(Path(os.environ["SUPERVISED_APP_IMPORT_CONTROL"]))


def journal(path: str, event: str, **fields: object) -> None:
    # With the module's import time: a worker forked after a HUP runs freshly imported code.
    journal_attempt(path, event, imported=IMPORTED, **fields)


class Sleep(jobq.Job):
    job_name = "Sleep"
    type = "sleep"

    def __init__(self, seconds: float, journal: str) -> None:
        self.seconds = seconds
        self.journal = journal

    def handle(self) -> None:
        journal(self.journal, "start")
        time.sleep(self.seconds)
        journal(self.journal, "end")


class Hold(jobq.Job):
    """Runs until the file `release` exists (bounded), so a test decides when it ends."""

    job_name = "Hold"
    type = "hold"

    def __init__(
        self, journal: str, release: str, limit: float = 60.0, ignore_term: bool = False
    ) -> None:
        self.journal = journal
        self.release = release
        self.limit = limit
        self.ignore_term = ignore_term

    def handle(self) -> None:
        if self.ignore_term:
            # A handler that will not stop on SIGTERM, so only the SIGKILL after it ends it.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        journal(self.journal, "start")
        deadline = time.monotonic() + self.limit
        while not Path(self.release).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        journal(self.journal, "end")


class Crash(jobq.Job):
    """Kills its own worker with SIGKILL, as the OOM killer would."""

    job_name = "Crash"
    type = "crash"

    def __init__(self, journal: str) -> None:
        self.journal = journal

    def handle(self) -> None:
        journal(self.journal, "start")
        os.kill(os.getpid(), signal.SIGKILL)


class Grow(jobq.Job):
    """Keeps `mib` MiB alive in its worker after it ends, to trip memory recycling."""

    job_name = "Grow"
    type = "grow"
    kept: list[bytes] = []  # noqa: RUF012 - the point is to stay allocated

    def __init__(self, mib: int, journal: str) -> None:
        self.mib = mib
        self.journal = journal

    def handle(self) -> None:
        journal(self.journal, "start")
        Grow.kept.append(os.urandom(self.mib * 2**20))
        journal(self.journal, "end")


class Fail(jobq.Job):
    """Raises with the message it was given, so a test chooses the error text it stores."""

    job_name = "Fail"
    type = "fail"

    def __init__(self, message: str, journal: str) -> None:
        self.message = message
        self.journal = journal

    def handle(self) -> None:
        journal(self.journal, "start")
        raise RuntimeError(self.message)
