"""Nothing an application opens crosses a fork: the master never imports --app, workers do,
each after its fork, and the master's own check of the application (at start, and on HUP in a
child it reads from its loop) never pauses renewal or fencing."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import time
from collections import defaultdict
from pathlib import Path

import psutil
import pytest

import jobq
from jobq.testing.history import read_journal
from tests.support import drivers
from tests.support.apps.supervised_app import Hold
from tests.support.supervising import (
    FAST,
    Supervisor,
    events,
    metrics_port,
    safe_cmdline,
    supervisor,
    wait_for_events,
)
from tests.support.waiting import wait_for

# FAST with a 12 s lease and room for slow renewal rounds on a loaded machine (the timing
# rule: 1 + 2 x 2.5 + 1 + 0 + 1 < 12). An attempt still running 13.5 s after its claim was
# renewed; an import of 14 s is longer than the whole lease.
ROOMY = (*FAST, "--lease", "12", "--renew-timeout", "2.5")
PAST_THE_LEASE = 13.5
SLOW_IMPORT = 14


class ReadOwn(jobq.Job):
    """The producer's side of forksafe_app.ReadOwn (same job_name): the workers hold the code,
    the test process never imports forksafe_app, which opens connections at import."""

    job_name = "ReadOwn"
    type = "read_own"

    def __init__(self, row: int, token: str) -> None:
        self.row = row
        self.token = token


pytestmark = pytest.mark.lease(6)


@pytest.mark.databases("postgresql", "sqlite")
def test_connections_an_app_opens_at_import_are_never_shared_between_workers(
    queue: jobq.Queue, dsn: str, db_kind: str, tmp_path: Path
) -> None:
    rows = 150
    tokens = {row: secrets.token_hex(8) for row in range(1, rows + 1)}
    app = drivers.connect(dsn, db_kind, autocommit=True)
    try:
        cursor = app.cursor()
        cursor.execute("CREATE TABLE forksafe_rows (id INTEGER PRIMARY KEY, token TEXT)")
        marker = "?" if db_kind == "sqlite" else "%s"
        insert = f"INSERT INTO forksafe_rows (id, token) VALUES ({marker}, {marker})"
        cursor.executemany(insert, list(tokens.items()))
        cursor.close()
    finally:
        app.close()
    journal = tmp_path / "journal"
    env = {"FORKSAFE_DSN": dsn, "FORKSAFE_JOURNAL": str(journal)}
    # One job a claim, enqueued once every worker is ready: otherwise, on a loaded machine,
    # the first worker up could claim them all in growing batches before the others came,
    # and the test would prove nothing about sharing.
    args = ("--workers", "3", "--app", "forksafe_app", "--prefetch", "1", *FAST)
    with supervisor(dsn, *args, env=env) as running:
        wait_for("three workers ready", lambda: workers_ready(running) >= 3)
        for row, token in tokens.items():
            queue.enqueue(ReadOwn(row, token))
        wait_for(
            f"all {rows} jobs to complete; log:\n{running.log}",
            lambda: queue.counts() == {"completed": rows},
            timeout=90,
        )
        running.signal(signal.SIGTERM)
        assert running.wait() == 0
        master = running.pid
    entries = read_journal(journal)
    reads = [e for e in entries if e["event"] == "read"]
    assert sorted(e["row"] for e in reads) == sorted(tokens), "a job ran twice or not at all"
    assert all(
        e["seen"][name] == e["token"] for e in reads for name in e["seen"] if "_" not in name
    )
    # Every connection a job used was opened by the process running it...
    assert all(e["opened_by"] == e["pid"] for e in reads)
    # ...in workers (and the master's short-lived checker), never in the master itself.
    assert master not in {e["pid"] for e in entries if e["event"] == "imported"}
    assert len({e["pid"] for e in reads}) > 1, "one worker ran every job: nothing was shared"
    if db_kind == "postgresql":
        # The database's view: no server session served two workers.
        for name in ("django", "psycopg", "pool"):
            workers_of: dict[int, set[int]] = defaultdict(set)
            for e in reads:
                workers_of[e["seen"][f"{name}_backend"]].add(e["pid"])
            assert all(len(pids) == 1 for pids in workers_of.values()), (name, workers_of)


def control(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The file that tells later imports of supervised_app to be slow or fail."""
    path = tmp_path / "import-control"
    return path, {"SUPERVISED_APP_IMPORT_CONTROL": str(path)}


@pytest.mark.databases("postgresql", "sqlite")
def test_a_slow_import_on_hup_pauses_neither_renewal_nor_fencing(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    journal, release = tmp_path / "journal", tmp_path / "release"
    orders, env = control(tmp_path)
    job_id = queue.enqueue(Hold(str(journal), str(release)))
    with supervisor(dsn, "--workers", "1", *ROOMY, env=env) as running:
        started = wait_for_events(journal, "start")[0]["mono"]
        # Longer than the whole lease: a master importing in its loop would renew nothing
        # meanwhile, and the running job's worker would be fenced.
        orders.write_text(json.dumps({"delay": SLOW_IMPORT}))
        running.signal(signal.SIGHUP)
        wait_for("the HUP's import to begin", Path(f"{orders}.seen").exists)
        orders.unlink()  # the new workers import at the usual speed
        running.wait_for_log("Reloading: replacing workers", timeout=30)
        assert time.monotonic() > started + PAST_THE_LEASE
        record = queue.get(job_id)
        assert record is not None
        assert (str(record.status), record.attempts) == ("in_progress", 1), running.log
        release.touch()
        wait_for("the job to complete", lambda: queue.counts() == {"completed": 1})
        running.signal(signal.SIGTERM)
        assert running.wait() == 0
    assert "cannot be renewed" not in running.log
    assert "Lease renewal timed out" not in running.log
    assert [e["attempt"] for e in events(journal, "end")] == [1]


@pytest.mark.databases("sqlite")
def test_a_reload_whose_import_fails_keeps_the_workers_running(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    orders, env = control(tmp_path)
    with supervisor(dsn, "--workers", "2", *FAST, env=env) as running:
        running.wait_for_log("ready", count=2)
        before = {p.pid for p in running.workers()}
        orders.write_text(json.dumps({"fail": True}))
        running.signal(signal.SIGHUP)
        running.wait_for_log("Reload failed")
        assert "told to fail its import" in running.log
        assert "Retiring worker" not in running.log
        assert {p.pid for p in running.workers()} == before
        orders.unlink()
        running.signal(signal.SIGHUP)
        running.wait_for_log("Retiring worker", count=2)
        running.signal(signal.SIGTERM)
        assert running.wait() == 0


@pytest.mark.databases("sqlite")
def test_an_app_that_fails_its_import_stops_the_start_with_its_error(
    dsn: str, tmp_path: Path
) -> None:
    orders, env = control(tmp_path)
    orders.write_text(json.dumps({"fail": True}))
    with supervisor(dsn, "--workers", "1", *FAST, env=env) as running:
        assert running.wait() == 2
    assert "told to fail its import" in running.log
    assert "Spawned worker" not in running.log


# -- descriptors -------------------------------------------------------------------------------


def sockets_of(pid: int) -> set[str]:
    """The sockets process `pid` holds, as "socket:[inode]"."""
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:"):
                found.add(target)
    return found


def workers_ready(running: Supervisor) -> int:
    return sum("Worker" in line and line.rstrip().endswith("ready") for line in running.lines)


@pytest.mark.databases("sqlite")
def test_children_hold_none_of_the_masters_sockets(queue: jobq.Queue, dsn: str) -> None:
    """A worker forked while a scrape's connection is open holds neither it nor the /metrics
    listener, nor any other socket of the master's (its siblings' included); nor do the
    helpers."""
    args = ("--workers", "1", *FAST, "--metrics-port", "0", "--metrics-address", "127.0.0.1")
    with supervisor(dsn, *args) as running:
        port = metrics_port(running)
        # "Worker N ready", not the endpoint's line that names /readyz.
        wait_for("a worker ready", lambda: workers_ready(running) >= 1)
        before = sockets_of(running.pid)
        with socket.create_connection(("127.0.0.1", port)) as scrape:
            scrape.send(b"GET /metrics HTTP/1.1\r\n")  # not the end of a request: it stays open
            wait_for("the master to accept it", lambda: len(sockets_of(running.pid)) > len(before))
            running.signal(signal.SIGTTIN)
            wait_for("the second worker ready", lambda: workers_ready(running) >= 2)
            master = sockets_of(running.pid)
            children = psutil.Process(running.pid).children()
            assert len(children) >= 5, children  # keeper, renewer, housekeeper, two workers
            for child in children:
                leaked = sockets_of(child.pid) & master
                title = " ".join(filter(None, safe_cmdline(child)))
                assert not leaked, f"{title} holds the master's {leaked}"
        running.signal(signal.SIGTERM)
        assert running.wait() == 0, running.log
