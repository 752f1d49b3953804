"""Running real `jobq-supervise` processes in tests, and reading what their jobs journaled."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.support.apps import APPS
from tests.support.waiting import wait_for

# "<time> <LEVEL> jobq[<pid>]: <message>", as jobq.logs formats every process's lines.
LOG_LINE = re.compile(r" jobq\[(\d+)\]: (.*)$")

# The master's line naming where it serves /metrics; in JSON logs it is inside "message".
SERVING = re.compile(r"Serving /metrics, /healthz and /readyz on ([^\s:]+):(\d+)")

# What stall_log() fills a supervisor's log pipe with; the reader leaves it out.
FILLER = "(filler: the log's reader is stalled)"

# Renewal settings that pass the timing rule with a 6 s lease, so fencing happens in seconds.
FAST = (
    "--lease", "6", "--renew-interval", "1", "--renew-timeout", "1",
    "--kill-grace", "0", "--safety-margin", "1", "--poll-interval", "0.2",
    "--maintenance-interval", "1",
)  # fmt: skip


class Supervisor:
    """A jobq-supervise process whose log is collected line by line."""

    def __init__(
        self,
        dsn: str,
        args: Sequence[str],
        env: dict[str, str] | None = None,
        entry: str = "jobq.supervisor",
        command: Sequence[str] | None = None,
        cwd: Path | None = None,
        stderr: int | None = None,
    ) -> None:
        """Runs `python -m entry --dsn dsn --app supervised_app *args`, or `command *args`.
        With `stderr` (a descriptor), its log goes there and is not collected."""
        environment = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(APPS), os.environ.get("PYTHONPATH", "")]),
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        default = [sys.executable, "-m", entry, "--dsn", dsn, "--app", "supervised_app"]
        self.process = subprocess.Popen(
            [*(command or default), *args],
            env=environment,
            cwd=cwd,
            stdout=subprocess.PIPE if stderr is None else subprocess.DEVNULL,
            stderr=subprocess.STDOUT if stderr is None else stderr,
            text=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self.reading = threading.Event()  # cleared: the log's reader stalls
        self.reading.set()
        self.reader = threading.Thread(target=self.read, daemon=True)
        if stderr is None:
            self.reader.start()

    def read(self) -> None:
        if self.process.stdout is None:
            return
        for line in self.process.stdout:
            self.reading.wait()
            if line.rstrip("\n") != FILLER:
                self.lines.append(line.rstrip("\n"))

    def stall_log(self) -> None:
        """Stop reading the log, and fill the pipe it is written to: every blocking write to
        it waits (as under a stalled `| tee`), until resume_log()."""
        self.reading.clear()
        fill(f"/proc/{self.pid}/fd/2", FILLER)

    def resume_log(self) -> None:
        self.reading.set()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    def wait_for_log(self, text: str, count: int = 1, timeout: float = 30.0) -> None:
        wait_for(
            f"{count} log line(s) with {text!r}; log so far:\n{self.log}",
            lambda: sum(text in line for line in self.lines) >= count,
            timeout,
        )

    def messages(self, pid: int | None = None) -> list[str]:
        """The log messages of one process (the master by default), in order."""
        wanted = self.pid if pid is None else pid
        found = [LOG_LINE.search(line) for line in list(self.lines)]
        return [m.group(2) for m in found if m is not None and int(m.group(1)) == wanted]

    def titles(self) -> dict[int, str]:
        """What `ps` shows for the master and every process under it, by pid."""
        try:
            family = [psutil.Process(self.pid), *psutil.Process(self.pid).children(True)]
        except psutil.NoSuchProcess:
            return {}
        # A title set by setproctitle reads back as one argument padded with empty ones.
        return {p.pid: " ".join(filter(None, safe_cmdline(p))) for p in family}

    def workers(self) -> list[psutil.Process]:
        """The worker children (not the renewer or housekeeper)."""
        children = psutil.Process(self.pid).children()
        return [c for c in children if "worker" in " ".join(safe_cmdline(c))]

    def signal(self, signum: signal.Signals) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout: float = 60.0) -> int:
        code = self.process.wait(timeout)
        if self.reader.is_alive():
            self.reader.join(timeout=5)
        return code

    def stop(self) -> None:
        """Make sure nothing is left running, whatever the test did."""
        if self.process.poll() is None:
            family = [psutil.Process(self.pid), *psutil.Process(self.pid).children(True)]
            for process in family:
                with suppress(psutil.Error):
                    process.kill()
            self.process.wait(10)
        if self.reader.is_alive():
            self.reader.join(timeout=5)


def fill(path: str, line: str = FILLER) -> None:
    """Write to the pipe at `path` until it is full: every blocking write to it then waits."""
    pipe = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    try:
        with suppress(BlockingIOError):
            while True:
                os.write(pipe, (line + "\n").encode())
    finally:
        os.close(pipe)


def safe_cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


@contextmanager
def supervisor(
    dsn: str,
    *args: str,
    env: dict[str, str] | None = None,
    entry: str = "jobq.supervisor",
    command: Sequence[str] | None = None,
    cwd: Path | None = None,
) -> Iterator[Supervisor]:
    running = Supervisor(dsn, args, env, entry, command, cwd)
    try:
        yield running
    finally:
        running.stop()


def read_journal(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def events(path: Path, event: str, job: int | None = None) -> list[dict[str, Any]]:
    return [e for e in read_journal(path) if e["event"] == event and job in (None, e["job"])]


def wait_for_events(
    path: Path, event: str, count: int = 1, timeout: float = 30.0
) -> list[dict[str, Any]]:
    def enough() -> list[dict[str, Any]]:
        found = events(path, event)
        return found if len(found) >= count else []

    return wait_for(f"{count} {event!r} event(s) in the journal", enough, timeout)


def no_process_alive(pids: Sequence[int]) -> bool:
    return not any(psutil.pid_exists(pid) and alive(pid) for pid in pids)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# -- the metrics endpoint ----------------------------------------------------------------------


def metrics_address(running: Supervisor, timeout: float = 30.0) -> tuple[str, int]:
    """The (address, port) the master said it serves /metrics on (port 0 picks one)."""
    running.wait_for_log("Serving /metrics", timeout=timeout)
    found = [m for m in map(SERVING.search, list(running.lines)) if m is not None]
    assert found, f"no address in the master's 'Serving /metrics' line:\n{running.log}"
    return found[0].group(1), int(found[0].group(2))


def metrics_port(running: Supervisor, timeout: float = 30.0) -> int:
    return metrics_address(running, timeout)[1]


def http_get(port: int, path: str, method: str = "GET", timeout: float = 10.0) -> tuple[int, str]:
    """(status, body) of one request to the master's endpoint on loopback."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


@dataclass(frozen=True)
class Scrape:
    """One /metrics reply, parsed with prometheus-client's own parser."""

    text: str
    samples: tuple[Sample, ...]

    def value(self, name: str, **labels: str) -> float:
        """The sum of the samples called `name` whose labels include `labels`."""
        return sum(
            sample.value
            for sample in self.samples
            if sample.name == name and labels.items() <= sample.labels.items()
        )

    def values(self, name: str) -> dict[tuple[tuple[str, str], ...], float]:
        """Every sample called `name`, by its sorted labels."""
        return {
            tuple(sorted(sample.labels.items())): sample.value
            for sample in self.samples
            if sample.name == name
        }


def scrape(port: int) -> Scrape:
    status, text = http_get(port, "/metrics")
    assert status == 200, f"/metrics answered {status}: {text}"
    families = text_string_to_metric_families(text)
    return Scrape(text, tuple(sample for family in families for sample in family.samples))
