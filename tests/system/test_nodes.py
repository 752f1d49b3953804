"""A running jobq-supervise records a heartbeat: `jobq nodes` and the status page's /nodes
show it, its pools, workers and the job each runs; once its master is killed, it shows as
silent; once it stops, as stopped."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest

import jobq
from tests.support.apps.supervised_app import Hold
from tests.support.paths import REPO
from tests.support.supervising import FAST, supervisor
from tests.support.waiting import wait_for
from tests.support.web import jobq_web


def nodes(dsn: str, *args: str) -> list[dict[str, Any]]:
    """`jobq nodes --json`, as a script reads it."""
    done = subprocess.run(
        [sys.executable, "-m", "jobq", "nodes", "--dsn", dsn, "--json", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return list(json.loads(done.stdout))


def node_of(dsn: str, pid: int, *args: str) -> dict[str, Any] | None:
    return next((node for node in nodes(dsn, *args) if node["pid"] == pid), None)


def page(address: str, path: str) -> str:
    with urllib.request.urlopen(f"{address}{path}", timeout=30) as answer:
        return str(answer.read().decode())


@pytest.mark.databases("postgresql", "mariadb", "sqlite")
def test_a_supervisor_shows_with_the_job_it_runs_then_as_silent_once_killed(
    dsn: str, queue: jobq.Queue, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    job_id = queue.enqueue(Hold(str(tmp_path / "journal"), str(release)))
    with supervisor(dsn, "--pool", "hold:2", *FAST) as running:

        def running_the_job() -> dict[str, Any] | None:
            node = node_of(dsn, running.pid)
            if node is None or not any(w["running"] for w in node["workers"]):
                return None
            return node

        node = wait_for("the node running the job", running_the_job, timeout=60.0)
        assert node["state"] == "running"
        assert not node["silent"]
        assert node["version"] == jobq.__version__
        assert node["pools"] == [
            {"name": "hold", "types": ["hold"], "workers": 2, "concurrency": 1}
        ]
        (busy,) = [w for w in node["workers"] if w["running"]]
        (attempt,) = busy["running"]
        assert attempt["job_id"] == job_id
        assert attempt["type"] == "hold"
        assert attempt["lease_left"] > 0
        assert busy["pid"] in {process.pid for process in running.workers()}
        assert node["healthy"]
        assert node["problems"] == []

        with jobq_web(dsn, cwd=REPO) as address:
            shown = page(address, "/nodes")
            assert f"pid {running.pid}" in shown
            assert 'data-state="running"' in shown
            assert f"/jobs/{job_id}" in shown

            # The master alone: its housekeeper sees its socket close and exits, and no
            # heartbeat is written again.
            psutil.Process(running.pid).send_signal(signal.SIGKILL)
            wait_for(
                "the killed node to show as silent",
                lambda: (node_of(dsn, running.pid, "--silent-after", "1") or {}).get("silent"),
                timeout=60.0,
            )
            within_default = node_of(dsn, running.pid)  # the default threshold is 30 s
            assert within_default is not None
            assert within_default["state"] == "running"
            silent = page(address, "/nodes?silent_after=1")
            assert f"pid {running.pid}" in silent
            assert 'data-state="silent"' in silent
            release.touch()


@pytest.mark.databases("sqlite")
def test_a_supervisor_that_stops_says_so_in_its_last_heartbeat(dsn: str, queue: jobq.Queue) -> None:
    with supervisor(dsn, "--workers", "1", *FAST) as running:
        wait_for("the node", lambda: node_of(dsn, running.pid), timeout=60.0)
        running.signal(signal.SIGTERM)
        assert running.wait() == 0
    node = node_of(dsn, running.pid)
    assert node is not None
    assert node["state"] == "stopped"


@pytest.mark.databases("sqlite")
def test_the_nodes_page_refuses_a_bad_threshold_in_one_line(dsn: str, queue: jobq.Queue) -> None:
    with jobq_web(dsn, cwd=REPO) as address:
        with pytest.raises(urllib.error.HTTPError) as refused:
            page(address, "/nodes?silent_after=-1")
        assert refused.value.code == 400
        assert "silent_after must be a positive number" in refused.value.read().decode()


@pytest.mark.databases("postgresql", "sqlite")
def test_the_schedules_page_shows_what_supervisors_run_though_web_started_before(
    dsn: str, queue: jobq.Queue
) -> None:
    # The page's process imports no application: it learns the schedules from the database.
    with jobq_web(dsn, cwd=REPO) as address:
        assert "every-second" not in page(address, "/schedules")
        with supervisor(dsn, "--workers", "1", *FAST, "--app", "schedules_app") as running:
            wait_for(
                "the node's heartbeat naming its schedules",
                lambda: (node_of(dsn, running.pid) or {}).get("schedules"),
                timeout=60.0,
            )

            def listed() -> str | None:
                shown = page(address, "/schedules")
                return shown if "every-second" in shown and "nightly" in shown else None

            shown = wait_for("the schedules page to list them", listed, timeout=60.0)
            assert "(from the database)" in shown
            assert "/jobs?type=tick" in shown
            # `jobq schedules` without --app reads them from the database too.
            done = subprocess.run(
                [sys.executable, "-m", "jobq", "schedules", "--dsn", dsn, "--json"],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
            rows = {row["name"]: row for row in json.loads(done.stdout)}
            assert rows["every-second"]["type"] == "tick"
            assert rows["every-second"]["declared_here"] is False
            assert rows["nightly"]["schedule"] == "cron 30 2 * * * Europe/Berlin"
