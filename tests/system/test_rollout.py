"""Deploying while jobs run: a rolling restart, and jobq-supervise as a container's PID 1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

import jobq
from jobq.testing.history import check, read_journal
from tests.support.apps import APPS
from tests.support.apps.rollout_app import Orphan, Work
from tests.support.supervising import FAST, supervisor
from tests.support.waiting import wait_for

SHORT_JOBS = 2000
LONG_JOBS = 8


@pytest.fixture
def queue(postgresql_dsn: str) -> Iterator[jobq.Queue]:
    with jobq.Queue.connect(postgresql_dsn) as queue:
        queue.install()
        yield queue


def test_a_rolling_restart_loses_nothing_and_never_overlaps(
    queue: jobq.Queue, postgresql_dsn: str, tmp_path: Path
) -> None:
    journal = str(tmp_path / "journal")
    ids = [queue.enqueue(Work(0.002, journal)) for _ in range(SHORT_JOBS)]
    # Longer than two leases of 6 s: only renewal keeps them from running twice.
    ids += [queue.enqueue(Work(14, journal), type="long") for _ in range(LONG_JOBS)]
    # Two pools: the long jobs cannot take the short ones' workers, on either side.
    pools = ("--pool", "work:2", "--pool", "long:2")
    settings = (*pools, "--app", "rollout_app", "--graceful-timeout", "40", *FAST)
    with supervisor(postgresql_dsn, *settings) as old:
        wait_for(
            "some work done while long jobs run",
            lambda: (
                queue.counts().get("completed", 0) >= 200
                and queue.counts(type="long").get("in_progress", 0) >= 1
            ),
            timeout=60,
        )
        with supervisor(postgresql_dsn, *settings) as new:
            new.wait_for_log("Spawned worker", count=4)
            # Kubernetes' order: the new pod is up, then the old one gets SIGTERM.
            old.signal(signal.SIGTERM)
            assert old.wait(timeout=60) == 0, old.log
            wait_for(
                "every job to finish",
                lambda: queue.counts() == {"completed": SHORT_JOBS + LONG_JOBS},
                timeout=120,
            )
            new.signal(signal.SIGTERM)
            assert new.wait(timeout=60) == 0, new.log
    records = [queue.get(job_id) for job_id in ids]
    report = check(read_journal(journal), [r for r in records if r is not None])
    assert report.ok, report.summary()
    assert report.jobs == SHORT_JOBS + LONG_JOBS
    assert report.attempts_run == report.attempts_counted == SHORT_JOBS + LONG_JOBS


@pytest.mark.databases("sqlite")
def test_as_pid_1_it_reaps_orphans_and_handles_signals(dsn: str, tmp_path: Path) -> None:
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        pid_file = tmp_path / "orphan.pid"
        queue.enqueue(Orphan(str(pid_file)))
        environment = {**os.environ, "PYTHONPATH": str(APPS), "JOBQ_DSN": dsn}
        # A new PID namespace, as a container has: the supervisor is its PID 1.
        container = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc",
             sys.executable, "-m", "jobq.supervisor", "--app", "rollout_app", "--workers", "1",
             *FAST],
            env=environment,
        )  # fmt: skip
        try:
            master = wait_for(
                "the supervisor to start inside the namespace",
                lambda: next(iter(psutil.Process(container.pid).children()), None),
            )
            wait_for("the job to complete", lambda: queue.counts() == {"completed": 1})
            inner = int(wait_for("the orphan's pid", lambda: pid_file.read_text().strip()))
            # It sleeps a moment before it exits: it must first show up as the master's child,
            # which proves the test is looking at the right process...
            wait_for("the orphan to be the master's", lambda: child_with_inner_pid(master, inner))
            # ...and then be gone entirely: a zombie would still be listed.
            wait_for("the orphan to be reaped", lambda: not child_with_inner_pid(master, inner))
            master.send_signal(signal.SIGTERM)
            assert container.wait(timeout=30) == 0
        finally:
            if container.poll() is None:
                container.kill()
                container.wait(10)


def child_with_inner_pid(parent: psutil.Process, inner: int) -> bool:
    """Whether `parent` has a child (a zombie included) whose pid inside its namespace is
    `inner`: the last NSpid of /proc/<pid>/status."""
    for child in parent.children():
        try:
            status = Path(f"/proc/{child.pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("NSpid:") and int(line.split()[-1]) == inner:
                return True
    return False
