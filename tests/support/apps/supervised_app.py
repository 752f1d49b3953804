"""Jobs for tests that run real supervisors. Each attempt journals its start and end.

Loaded by the workers as `supervised_app` (the tests put this folder on PYTHONPATH), so every
class names itself explicitly.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

import jobq
from jobq.testing.history import journal_attempt
from jobq.testing.jobs import JournaledSleep

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


class Sleep(JournaledSleep):
    job_name = "Sleep"
    type = "sleep"

    def journal_fields(self) -> dict[str, Any]:
        return {"imported": IMPORTED}


class Echo(Sleep):
    """A Sleep that returns `value`: its completion carries a result."""

    job_name = "Echo"

    def __init__(self, seconds: float, journal: str, value: Any) -> None:
        super().__init__(seconds, journal)
        self.value = value

    def handle(self) -> Any:
        super().handle()
        return self.value


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


class Yielding(jobq.Job):
    """Runs until SIGTERM (bounded), which its own handler turns into a clean return: a job
    that outlives its worker's stop. It puts the handler it found back as it ends."""

    job_name = "Yielding"
    type = "yielding"

    def __init__(self, journal: str, limit: float = 60.0) -> None:
        self.journal = journal
        self.limit = limit

    def handle(self) -> None:
        stopped: list[int] = []
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: stopped.append(signum))
        try:
            journal(self.journal, "start")
            deadline = time.monotonic() + self.limit
            while not stopped and time.monotonic() < deadline:
                time.sleep(0.02)
            journal(self.journal, "end", stopped=bool(stopped))
        finally:
            signal.signal(signal.SIGTERM, previous)


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


PROCESSES = str(Path(__file__).with_name("attempt_processes.py"))
# An attempt that crashes or raises works this long first: long enough for its processes to
# start and be watched by the test (chaos.observe lists process families every 0.1 s).
ENDING_AFTER = 0.5


class Attempted(jobq.Job):
    """Each kind of work users write, for the fencing tests. Attempt 1 works for `seconds`
    (unless its `ending` cuts it short); later attempts work briefly and complete.

    kind: plain (sleeps), subprocess (waits on a subprocess that does the work), daemon
    (starts a double-forked setsid daemon that does the work, and sleeps meanwhile), gil
    (holds the GIL in C calls: libc's sleep() through ctypes.PyDLL, `gil_hold` s at a time).
    ending: hold (work, then end), crash (start the work, then SIGKILL its own worker, as the
    OOM killer would), raise (start the work, then raise: the attempt fails and is retried,
    and the work left running must not overlap with the retry).
    """

    job_name = "Attempted"
    type = "attempted"

    def __init__(
        self,
        journal: str,
        kind: str,
        seconds: float = 60.0,
        ending: str = "hold",
        gil_hold: int = 1,
    ) -> None:
        self.journal = journal
        self.kind = kind
        self.seconds = seconds
        self.ending = ending
        self.gil_hold = gil_hold

    def handle(self) -> None:
        claim = jobq.current_claim()
        assert claim is not None
        journal(self.journal, "start", kind=self.kind)
        first = claim.attempt == 1
        seconds = self.seconds if first else 0.2
        ending = self.ending if first else "hold"
        started = self.start(claim.id, claim.attempt, seconds, wait=ending == "hold")
        if ending != "hold":
            time.sleep(ENDING_AFTER)
        if ending == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        if ending == "raise":
            journal(self.journal, "end")  # this process's part of the attempt ends here
            raise RuntimeError("attempt 1 fails, leaving its work running")
        if started is not None:
            started.wait()
        journal(self.journal, "end")

    def start(
        self, job: int, attempt: int, seconds: float, wait: bool
    ) -> subprocess.Popen[bytes] | None:
        """Start the attempt's work; a subprocess the caller waits on, if any."""
        command = [sys.executable, PROCESSES, "", self.journal, str(job), str(attempt)]
        command.append(str(seconds))
        if self.kind == "subprocess":
            command[2] = "run"
            return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        if self.kind == "daemon":
            command[2] = "daemon"
            subprocess.run(command, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        if wait:
            self.pass_time(seconds)
        return None

    def pass_time(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        libc = ctypes.PyDLL(None)  # PyDLL: the GIL stays held for the whole call
        while (left := deadline - time.monotonic()) > 0:
            if self.kind == "gil":
                libc.sleep(max(1, min(self.gil_hold, math.ceil(left))))
            else:
                time.sleep(min(left, 0.02))


class Alarm(jobq.Job):
    """Uses SIGALRM through setitimer and alarm(), which the worker's fence once kept for
    itself, for `seconds` in all: the timer must fire, and the worker must live on."""

    job_name = "Alarm"
    type = "alarm"

    def __init__(self, journal: str, seconds: float) -> None:
        self.journal = journal
        self.seconds = seconds

    def handle(self) -> None:
        journal(self.journal, "start")
        fired: list[int] = []
        signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        deadline = time.monotonic() + self.seconds + 30
        while not fired and time.monotonic() < deadline:
            time.sleep(0.01)
        signal.alarm(0)
        journal(self.journal, "end", alarms=len(fired))


class CutConnection(jobq.Job):
    """Ends by having the database server drop its worker's connections, as a failover does,
    so that the acknowledgement that follows fails on a broken connection."""

    job_name = "CutConnection"
    type = "cut"

    def __init__(self, journal: str, dsn: str, server_port: int) -> None:
        self.journal = journal
        self.dsn = dsn
        self.server_port = server_port

    def handle(self) -> None:
        journal(self.journal, "start")
        mine = psutil.Process().net_connections("tcp")
        ports = [c.laddr.port for c in mine if c.raddr and c.raddr.port == self.server_port]
        with jobq.Queue.connect(self.dsn) as admin:
            backend = admin.backend
            if self.dsn.startswith("postgresql"):
                backend.fetchall(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE client_port = ANY(%(ports)s)",
                    {"ports": ports},
                )
            else:
                for (session,) in backend.fetchall(
                    "SELECT id FROM information_schema.processlist"
                    " WHERE SUBSTRING_INDEX(host, ':', -1) IN %(ports)s",
                    {"ports": [str(port) for port in ports] or [""]},
                ):
                    backend.execute("KILL CONNECTION %(id)s", {"id": session})
        journal(self.journal, "end", cut=len(ports))


class Environment(jobq.Job):
    """Returns the JOBQ_* variables a program it starts sees, and whether the job itself
    still reaches its queue by Queue.connect() alone, its DSN from where jobq keeps it."""

    job_name = "Environment"
    type = "environment"

    def handle(self) -> dict[str, Any]:
        listed = subprocess.run(["env", "-0"], capture_output=True, check=True, timeout=30)
        entries = listed.stdout.decode().split("\0")
        seen = dict(entry.split("=", 1) for entry in entries if entry.startswith("JOBQ_"))
        claim = jobq.current_claim()
        assert claim is not None
        with jobq.Queue.connect() as queue:
            reached = queue.get(claim.id) is not None
        return {"variables": seen, "reached": reached}
