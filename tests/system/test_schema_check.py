"""A database without jobq's schema, met at start: one line that says to run `jobq migrate`,
before any worker; `--migrate` installs it instead; a schema dropped later is named too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import jobq
from jobq.backends import for_dsn
from jobq.errors import NoSchema
from jobq.queue import schema
from tests.support.apps import APPS
from tests.support.apps.supervised_app import Sleep
from tests.support.supervising import FAST, supervisor, wait_for_events


def supervise(dsn: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """jobq-supervise run to its end, at the default log level."""
    return subprocess.run(
        [sys.executable, "-m", "jobq.supervisor", "--dsn", dsn, "--app", "supervised_app", *args],
        env={**os.environ, "PYTHONPATH": str(APPS)},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def sqlite_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.sqlite3*"))


def test_a_database_without_the_schema_is_refused_in_one_line_before_any_worker(
    dsn: str, db_kind: str, tmp_path: Path
) -> None:
    result = supervise(dsn, "--workers", "2", *FAST, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("jobq-supervise: the ")
    assert lines[0].endswith("run `jobq migrate` to create it, or start with --migrate")
    if db_kind == "sqlite":
        assert "jobq.sqlite3 does not exist" in lines[0]
        assert sqlite_files(tmp_path) == [], "an empty database file was left behind"
    else:
        assert "the database has no jobq schema" in lines[0]
        with jobq.Queue.connect(dsn) as queue:
            assert queue.backend.schema_version() == 0, "the check wrote to the database"


@pytest.mark.databases("sqlite", "postgresql")
def test_an_older_schema_names_both_versions(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        backend = type(queue.backend)
    # This jobq as if it had one more migration than the database has had.
    monkeypatch.setattr(backend, "migrations", (*backend.migrations, ()))
    need = len(backend.migrations)
    with pytest.raises(NoSchema) as refused:
        schema.require(dsn)
    assert str(refused.value) == (
        f"the database has jobq's schema version {need - 1}, this jobq needs version {need}: "
        "run `jobq migrate` to upgrade it"
    )


@pytest.mark.databases("sqlite", "postgresql")
def test_migrate_installs_the_schema_at_start_and_the_jobs_run(dsn: str, tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    with supervisor(dsn, "--migrate", "--workers", "1", *FAST) as running:
        running.wait_for_log("ready")
        with jobq.Queue.connect(dsn) as queue:
            queue.enqueue(Sleep(0, str(journal)))
        wait_for_events(journal, "end")
        running.signal(signal.SIGTERM)
        assert running.wait() == 0, running.log
    version = len(for_dsn(dsn).migrations)
    assert f"--migrate: created the schema (version {version})" in running.log
    with jobq.Queue.connect(dsn) as queue:
        assert queue.backend.schema_version() == len(queue.backend.migrations)


@pytest.mark.databases("sqlite", "postgresql")
def test_a_worker_that_finds_the_tables_dropped_names_jobq_migrate(dsn: str) -> None:
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
    with supervisor(dsn, "--workers", "1", *FAST) as running:
        running.wait_for_log("ready")
        with jobq.Queue.connect(dsn) as queue:
            queue.backend.execute("DROP TABLE jobq_jobs")
        running.signal(signal.SIGTTIN)  # a new worker, whose first claim fails
        running.wait_for_log("(the database has no jobq schema: run `jobq migrate`)")
        running.signal(signal.SIGQUIT)
        running.wait()
