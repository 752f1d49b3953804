"""The master's metrics port under a real low file limit: idle connections past the limit,
and accept() failing with EMFILE, stop neither the supervisor nor the job it runs."""

from __future__ import annotations

import contextlib
import socket
import sys
from pathlib import Path

import psutil

import jobq
from tests.support.apps.supervised_app import Hold
from tests.support.supervising import (
    metrics_port,
    scrape,
    supervisor,
    wait_for_events,
)
from tests.support.waiting import wait_for

FILE_LIMIT = 128
# More than the file limit, as the reproduction opened.
IDLE_CLIENTS = 131
WAIT = 60.0


def open_files(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def test_idle_clients_past_the_file_limit_leave_the_master_and_its_job_running(
    postgresql_dsn: str, tmp_path: Path
) -> None:
    journal, release = tmp_path / "journal", tmp_path / "release"
    argv = [
        "prlimit", f"--nofile={FILE_LIMIT}", sys.executable, "-m", "jobq.supervisor",
        "--dsn", postgresql_dsn, "--app", "supervised_app", "--workers", "1",
        "--metrics-port", "0",
    ]  # fmt: skip
    with (
        jobq.Queue.connect(postgresql_dsn) as queue,
        supervisor(postgresql_dsn, command=argv) as running,
        contextlib.ExitStack() as clients,
    ):
        queue.install()
        job_id = queue.enqueue(Hold(str(journal), str(release), limit=WAIT))
        port = metrics_port(running)
        wait_for_events(journal, "start")
        master = psutil.Process(running.pid)
        for _ in range(IDLE_CLIENTS):
            clients.enter_context(socket.create_connection(("127.0.0.1", port), timeout=WAIT))
        # Then no file to spare at all: each accept() fails with EMFILE until clients that
        # stalled are dropped.
        master.rlimit(psutil.RLIMIT_NOFILE, (open_files(running.pid) - 2, FILE_LIMIT))
        wait_for(
            "the master to say it cannot accept, or to exit",
            lambda: running.process.poll() is not None or "cannot accept" in running.log,
            timeout=WAIT,
        )
        assert running.process.poll() is None, running.log
        release.touch()
        record = queue.wait(job_id, timeout=WAIT)
        assert record.status == "completed", record.last_error
        clients.close()
        master.rlimit(psutil.RLIMIT_NOFILE, (FILE_LIMIT, FILE_LIMIT))
        errors = wait_for(
            "a scrape once the clients are gone",
            lambda: scrape(port).value("jobq_accept_errors_total", listener="metrics"),
            timeout=WAIT,
        )
        assert errors >= 1
        assert running.process.poll() is None
