"""What every user of the machine reads of a jobq command given a DSN with a password: its
command line in /proc/PID/cmdline, for each command and every process under it."""

from __future__ import annotations

import sys
from pathlib import Path

import psutil
import pytest

import jobq
from tests.support.supervising import supervisor

PASSWORD = "s3cret-pw"

COMMANDS = {
    "work": ["-m", "jobq", "work", "--dsn"],
    "web": ["-m", "jobq", "web", "--bind", "127.0.0.1:0", "--dsn"],
    "supervise": ["-m", "jobq.supervisor", "--workers", "1", "--dsn"],
}
# The line each prints once it has parsed its arguments and reached the database.
STARTED = {"work": "Worker", "web": "serving on", "supervise": "jobq-supervise started"}


def cmdline(process: psutil.Process) -> str:
    return Path(f"/proc/{process.pid}/cmdline").read_bytes().decode(errors="replace")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_no_process_of_a_jobq_command_shows_its_dsn_password(
    command: str, postgresql_dsn: str
) -> None:
    # The test server trusts loopback: the password is carried, and never asked for.
    dsn = postgresql_dsn.replace("@", f":{PASSWORD}@", 1)
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
    argv = [sys.executable, *COMMANDS[command], dsn]
    with supervisor(dsn, "--log-level", "INFO", command=argv) as running:
        running.wait_for_log(STARTED[command])
        root = psutil.Process(running.pid)
        titles = [cmdline(p) for p in [root, *root.children(recursive=True)]]
    assert titles
    for title in titles:
        assert PASSWORD not in title, title
    if command != "supervise":  # whose master shows what it does instead
        assert "postgres:***@" in titles[0], titles[0]
