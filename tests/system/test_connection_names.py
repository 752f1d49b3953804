"""Every connection jobq opens names itself to the database: a DBA reading pg_stat_activity
tells a supervisor's workers, renewer and housekeeper, and `jobq web`, from the
application's own connections and from one another."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import psycopg
import pytest

import jobq
from tests.support.apps.supervised_app import Hold
from tests.support.paths import REPO
from tests.support.supervising import FAST, supervisor
from tests.support.waiting import wait_for
from tests.support.web import jobq_web

HOST = socket.gethostname()
WORKER = re.compile(rf"jobq worker \d+ of {re.escape(HOST)}")


def names(dsn: str) -> list[str]:
    """The application names of every other session on the test's database."""
    with psycopg.connect(dsn, autocommit=True, application_name="test reader") as reading:
        rows = reading.execute(
            "SELECT application_name FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return sorted(str(row[0]) for row in rows)


@pytest.mark.databases("postgresql")
def test_a_supervisors_connections_and_the_status_pages_are_named(
    dsn: str, queue: jobq.Queue, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    # A job that runs: the renewer connects once it has a lease to renew.
    queue.enqueue(Hold(str(tmp_path / "journal"), str(release)))
    with supervisor(dsn, "--workers", "2", *FAST) as running:
        wanted = {f"jobq renewer of {HOST}", f"jobq housekeeper of {HOST}"}

        def all_named() -> list[str] | None:
            found = names(dsn)
            workers = [name for name in found if WORKER.fullmatch(name)]
            return found if wanted <= set(found) and len(workers) == 2 else None

        seen = wait_for("a supervisor's named connections", all_named, timeout=60.0)
        pids = {process.pid for process in running.workers()}
        assert {f"jobq worker {pid} of {HOST}" for pid in pids} <= set(seen)
        assert "" not in seen, f"an unnamed connection: {seen}"
        release.touch()

    with jobq_web(dsn, cwd=REPO):
        wait_for("jobq web's connection", lambda: f"jobq web of {HOST}" in names(dsn))


@pytest.mark.databases("postgresql")
def test_an_application_name_the_dsn_gives_is_kept(dsn: str, queue: jobq.Queue) -> None:
    joined = "&" if "?" in dsn else "?"
    with jobq.Queue.connect(f"{dsn}{joined}application_name=billing") as mine:
        assert mine.counts() is not None
        assert "billing" in names(dsn)
