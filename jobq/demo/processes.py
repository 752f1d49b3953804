"""The demo's processes: started with their output read and timed line by line, and stopped
by escalating requests, so that nothing the demo started outlives it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import psutil

# How long a process gets after each stop request before the next, firmer one.
STOP_WAIT = 3.0
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Line:
    at: float  # time.monotonic() when the demo read it
    text: str

    def record(self) -> dict[str, Any] | None:
        """The log record on this line, if it is one of jobq's with an event."""
        if not self.text.startswith("{"):
            return None  # not a record: e.g. a warning Python printed
        with suppress(ValueError):
            record = json.loads(self.text)
            if isinstance(record, dict) and "event" in record:
                return record
        return None


class Started:
    """A process the demo started, its output read as it comes, each line timed on arrival."""

    def __init__(self, label: str, argv: Sequence[str], env: dict[str, str]) -> None:
        self.label = label
        self.popen = subprocess.Popen(
            list(argv),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        self.lines: list[Line] = []
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    @property
    def pid(self) -> int:
        return self.popen.pid

    def read(self) -> None:
        assert self.popen.stdout is not None
        for text in self.popen.stdout:
            self.lines.append(Line(time.monotonic(), text.rstrip("\n")))

    def running(self) -> bool:
        return self.popen.poll() is None

    def signal(self, signum: signal.Signals) -> None:
        if self.running():
            with suppress(ProcessLookupError):
                self.popen.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL it and whatever it forked: the last resort when stop requests failed."""
        if self.running():
            with suppress(psutil.Error):
                family = psutil.Process(self.pid).children(recursive=True)
                for process in family:
                    with suppress(psutil.Error):
                        process.kill()
            self.signal(signal.SIGKILL)
        with suppress(subprocess.TimeoutExpired):
            self.popen.wait(STOP_WAIT)
        self.reader.join(STOP_WAIT)


def wait_until_exited(processes: Sequence[Started], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for process in processes:
        with suppress(subprocess.TimeoutExpired):
            process.popen.wait(max(0.0, deadline - time.monotonic()))


def stop(processes: Sequence[Started]) -> None:
    """SIGTERM, then SIGTERM again, then SIGKILL, each after a bounded wait."""
    try:
        for _ in range(2):
            # The first request lets a plain worker finish its job and a supervisor drain;
            # a second one interrupts the job and stops a supervisor at once.
            for process in processes:
                process.signal(signal.SIGTERM)
            wait_until_exited(processes, STOP_WAIT)
    finally:
        # Also reached on a second Ctrl-C during the waits: nothing may be left running.
        for process in processes:
            process.kill()


def worker_env(dsn: str) -> dict[str, str]:
    """Our environment without any JOBQ_* setting, which would change the scenario (a
    JOBQ_LOG_LEVEL of WARNING alone would hide the lines the demo reads), and able to import
    the same jobq as this process."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("JOBQ_")}
    # In the environment, not on the command line, where `ps` would show its password to all.
    env["JOBQ_DSN"] = dsn
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


@contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt, so a terminated demo still stops its processes."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
