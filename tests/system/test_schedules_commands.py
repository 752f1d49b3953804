"""Periodic jobs through the commands: `jobq schedules` lists them, `jobq work` takes their
slots, and a bad declaration stops a command when the app is imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import jobq
from tests.support.apps import APPS

pytestmark = pytest.mark.lease(60)


def test_jobq_schedules_lists_each_schedule(queue: jobq.Queue, dsn: str) -> None:
    command = [sys.executable, "-m", "jobq", "schedules", "--dsn", dsn, "--app", "schedules_app"]
    run = subprocess.run(
        [*command, "--json"], cwd=APPS, capture_output=True, text=True, timeout=60, check=True
    )
    listed = {row["name"]: row for row in json.loads(run.stdout)}
    assert listed["every-second"]["schedule"] == "every 1s"
    assert listed["every-second"]["last_slot"] is None
    assert listed["nightly"]["schedule"] == "cron 30 2 * * * Europe/Berlin"
    assert listed["nightly"]["next_slot"].endswith(("T01:30:00+00:00", "T00:30:00+00:00"))
    table = subprocess.run(command, cwd=APPS, capture_output=True, text=True, timeout=60)
    assert table.returncode == 0, table.stderr
    assert "every-second" in table.stdout
    assert "last_job_id" in table.stdout


def test_jobq_work_enqueues_the_slots_and_runs_their_jobs(queue: jobq.Queue, dsn: str) -> None:
    command = [sys.executable, "-m", "jobq", "work", "--dsn", dsn, "--app", "schedules_app"]
    run = subprocess.run(
        [*command, "--type", "tick", "--max-jobs", "2", "--poll-interval", "0.2"],
        cwd=APPS,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert queue.counts("tick") == {"completed": 2}


def test_a_bad_schedule_is_refused_when_the_app_is_imported(tmp_path: Path, dsn: str) -> None:
    (tmp_path / "badly_scheduled.py").write_text(
        "import jobq\n"
        "class Ping(jobq.Job):\n"
        "    job_name = 'badly_scheduled.Ping'\n"
        "jobq.schedule('ping', Ping(), cron='0 25 * * *')\n"
    )
    command = ["schedules", "--dsn", dsn, "--app", "badly_scheduled"]
    for entry in (["-m", "jobq", *command], ["-m", "jobq.supervisor", *command[1:]]):
        run = subprocess.run(
            [sys.executable, *entry], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert run.returncode == 2, run.stderr
        assert "jobq.schedule('ping'): invalid cron '0 25 * * *'" in run.stderr
