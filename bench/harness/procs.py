"""The processes a bench run starts, tracked so that every exit path stops them.

Each child gets a session of its own: Ctrl-C in the terminal then reaches only the bench, which
stops its children in order (workers before the database they talk to) instead of every
process receiving SIGINT at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


def free_port() -> int:
    # Another process may take the port before our server binds it: rare, and the server's
    # start then fails loudly rather than talking to someone else's server.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "".join(path.read_text(errors="replace").splitlines(True)[-lines:])
    except OSError as error:
        return f"(cannot read {path}: {error})"


class Processes:
    """Starts children with their output in log files, and stops them all at the end."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self.running: list[subprocess.Popen[bytes]] = []
        self.logs: dict[int, Path] = {}
        self.counter = 0

    def spawn(
        self,
        name: str,
        cmd: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
    ) -> subprocess.Popen[bytes]:
        self.counter += 1
        log = self.logdir / f"{self.counter:03d}-{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                list(cmd),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=None if env is None else dict(env),
                cwd=cwd,
                start_new_session=True,
            )
        self.running.append(proc)
        self.logs[proc.pid] = log
        return proc

    def log_of(self, proc: subprocess.Popen[bytes]) -> Path:
        return self.logs[proc.pid]

    def send(self, proc: subprocess.Popen[bytes], signum: int) -> None:
        """Signal the child's whole process group (a supervisor's workers, pgbench's threads)."""
        if proc.poll() is not None:
            return
        # The group id is the child's own pid (start_new_session): only what we started.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signum)

    def stop(
        self, proc: subprocess.Popen[bytes], signum: int = signal.SIGTERM, grace: float = 15.0
    ) -> int:
        """Ask politely, wait up to `grace` seconds, then SIGKILL the group. Returns the code.

        The polite signal goes to the child alone: a supervisor stops its own workers and
        helpers, and would take a TERM they received directly for a crash of theirs.
        """
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signum)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.send(proc, signal.SIGKILL)
                proc.wait(timeout=10)
        # Stragglers in the group (a worker whose master died first) go too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc in self.running:
            self.running.remove(proc)
        return int(proc.returncode)

    def wait_all(self, procs: Sequence[subprocess.Popen[bytes]], timeout: float) -> bool:
        """Wait for every one of `procs` to exit by itself, up to `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(p.poll() is not None for p in procs):
                return True
            time.sleep(0.1)
        return False

    def stop_all(self) -> None:
        # Newest first: workers before the servers they use.
        for proc in reversed(list(self.running)):
            with contextlib.suppress(Exception):
                self.stop(proc, grace=10.0)
