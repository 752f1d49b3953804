"""`jobq migrate --sql` prints what `jobq migrate` runs, as a script the database's own client
applies to the same schema; `--status` says what is pending; and two migrations started at
once end with one schema, each version applied once."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import jobq
from tests.support.schema_sql import schema_of
from tests.support.servers import fresh_database, server_of

TIMEOUT = 120


def jobq_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobq", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


@contextmanager
def another(db_kind: str, request: pytest.FixtureRequest, directory: Path) -> Iterator[str]:
    """A second fresh database of the kind of `dsn`."""
    with fresh_database(db_kind, server_of(db_kind, request), directory / "other.sqlite3") as url:
        yield url


def client(dsn: str) -> list[str]:
    """The database's own command-line client, reading a script on its standard input."""
    if dsn.startswith("sqlite"):
        return ["sqlite3", "-bail", urlsplit(dsn).path]
    if dsn.startswith("postgresql"):
        return ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn]
    url = urlsplit(dsn)
    return [
        "mariadb",
        # A trigger keeps the character set of the session that made it, as jobq's own.
        "--default-character-set=utf8mb4",
        f"--host={url.hostname}",
        f"--port={url.port}",
        f"--user={url.username}",
        url.path.lstrip("/"),
    ]


def apply(dsn: str, script: str) -> None:
    done = subprocess.run(
        client(dsn), input=script, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert done.returncode == 0, done.stderr


def versions_of(dsn: str) -> list[int]:
    with jobq.Queue.connect(dsn) as queue:
        rows = queue.backend.fetchall("SELECT version FROM jobq_schema ORDER BY version")
    return [int(version) for (version,) in rows]


def latest(dsn: str) -> int:
    with jobq.Queue.connect(dsn) as queue:
        return len(queue.backend.migrations)


def test_the_printed_script_applied_by_the_database_s_client_gives_the_same_schema(
    dsn: str, db_kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    assert jobq_cli("migrate", "--dsn", dsn).returncode == 0
    with another(db_kind, request, tmp_path) as scripted:
        if db_kind == "sqlite":
            apply(scripted, "VACUUM;")  # sqlite3 creates the file; the script then fills it
        printed = jobq_cli("migrate", "--sql", "--dsn", scripted)
        assert printed.returncode == 0, printed.stderr
        apply(scripted, printed.stdout)
        assert schema_of(scripted) == schema_of(dsn)
        assert versions_of(scripted) == versions_of(dsn) == list(range(1, latest(dsn) + 1))
        status = jobq_cli("migrate", "--status", "--dsn", scripted)
        assert (status.returncode, status.stdout) == (
            0,
            f"jobq: the schema is current (version {latest(dsn)})\n",
        )
        # Printing the SQL ran nothing: a database the script did not touch has no schema.
        (tmp_path / "untouched").mkdir()
        with another(db_kind, request, tmp_path / "untouched") as untouched:
            if db_kind == "sqlite":
                apply(untouched, "VACUUM;")
            assert jobq_cli("migrate", "--sql", "--dsn", untouched).returncode == 0
            assert "no schema" in jobq_cli("migrate", "--status", "--dsn", untouched).stdout


def test_a_script_up_to_a_version_leaves_the_rest_pending_for_jobq_migrate(
    dsn: str, db_kind: str
) -> None:
    if db_kind == "sqlite":
        apply(dsn, "VACUUM;")
    printed = jobq_cli("migrate", "--sql", "--from", "0", "--to", "3", "--dsn", dsn)
    assert printed.returncode == 0, printed.stderr
    apply(dsn, printed.stdout)
    last = latest(dsn)
    status = jobq_cli("migrate", "--status", "--dsn", dsn)
    assert status.returncode == 1
    assert f"version 3, this jobq has {last}: versions 4 to {last} pending" in status.stdout
    rest = jobq_cli("migrate", "--sql", "--dsn", dsn).stdout
    assert f"version 3 to {last}" in rest
    assert "INSERT INTO jobq_schema (version) VALUES (3)" not in rest
    migrated = jobq_cli("migrate", "--dsn", dsn)
    assert migrated.stdout == f"jobq: upgraded the schema from version 3 to {last}\n"
    assert versions_of(dsn) == list(range(1, last + 1))


def test_a_range_outside_this_jobq_s_versions_is_refused_in_one_line(dsn: str) -> None:
    assert jobq_cli("migrate", "--dsn", dsn).returncode == 0
    refused = jobq_cli("migrate", "--sql", "--from", "5", "--to", "2", "--dsn", dsn)
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr.count("\n") == 1
    assert "no migration from version 5 to 2" in refused.stderr
    assert "pick --from and --to" in refused.stderr


def test_two_migrations_started_at_once_end_with_one_schema(dsn: str) -> None:
    if dsn.startswith("sqlite"):
        apply(dsn, "VACUUM;")  # both open the file; neither may create it under the other
    both = [
        subprocess.Popen(
            [sys.executable, "-m", "jobq", "migrate", "--dsn", dsn],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    said = sorted(process.communicate(timeout=TIMEOUT)[0] for process in both)
    assert [process.returncode for process in both] == [0, 0], said
    last = latest(dsn)
    assert said == [
        f"jobq: created the schema (version {last})\n",
        f"jobq: the schema is already current (version {last})\n",
    ]
    assert versions_of(dsn) == list(range(1, last + 1))
