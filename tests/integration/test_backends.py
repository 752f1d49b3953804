"""Backend selection and the server rules each backend enforces before it will run.

These check the refusals against real servers (or the real sqlite3 module, patched), because a
rule that is only read and never triggered tends to stop firing without anyone noticing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

import jobq
import jobq.backends.sqlite
from jobq.backends.mysql import MysqlBackend
from tests.support.jobs import Noop
from tests.support.servers import ServerInfo, fresh_mariadb_database

# -- MySQL/MariaDB: binlog_format -----------------------------------------------------------


def set_global_binlog_format(server: ServerInfo, binlog_format: str) -> None:
    # GLOBAL only reaches sessions opened afterwards, which is why callers connect anew.
    with (
        pymysql.connect(
            host=server.host, port=server.port, user=server.user, password="", autocommit=True
        ) as conn,
        conn.cursor() as cur,
    ):
        cur.execute("SET GLOBAL binlog_format = %s", (binlog_format,))


@pytest.fixture
def binlog_dsn(mariadb_statement_binlog_server: ServerInfo) -> Iterator[str]:
    """A fresh database on the binary-logging server (whose format each test sets itself)."""
    with fresh_mariadb_database(mariadb_statement_binlog_server) as url:
        yield url


def install_enqueue_claim(queue: jobq.Queue) -> None:
    queue.install()
    job_id = queue.enqueue(Noop())
    claim = queue.claim()
    assert claim is not None
    assert claim.id == job_id
    assert queue.complete(claim)


def test_mysql_refuses_statement_binlog_format(
    mariadb_statement_binlog_server: ServerInfo, binlog_dsn: str
) -> None:
    # The server starts in STATEMENT, but another test may have changed the global since.
    set_global_binlog_format(mariadb_statement_binlog_server, "STATEMENT")
    with pytest.raises(jobq.ConfigurationError) as raised:
        jobq.Queue.connect(binlog_dsn)
    message = str(raised.value)
    assert "binlog_format" in message
    assert "STATEMENT" in message
    assert "ROW or MIXED" in message


@pytest.mark.parametrize("binlog_format", ["ROW", "MIXED"])
def test_mysql_accepts_row_and_mixed_binlog_format(
    mariadb_statement_binlog_server: ServerInfo, binlog_dsn: str, binlog_format: str
) -> None:
    set_global_binlog_format(mariadb_statement_binlog_server, binlog_format)
    with jobq.Queue.connect(binlog_dsn) as queue:
        install_enqueue_claim(queue)


def test_mysql_without_binary_log_accepts_any_binlog_format(mariadb_dsn: str) -> None:
    # binlog_format is MIXED by default, so a bare server would not exercise the log_bin half
    # of the rule; the session variable is enough because check_binlog reads @@binlog_format.
    with jobq.Queue.connect(mariadb_dsn) as queue:
        backend = queue.backend
        assert isinstance(backend, MysqlBackend)
        backend.execute("SET SESSION binlog_format = 'STATEMENT'")
        backend.check_binlog()
        install_enqueue_claim(queue)


# -- SQLite: minimum version ----------------------------------------------------------------


def test_sqlite_minimum_version_is_itself_accepted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Guards the comparison's direction at the boundary (< rather than <=).
    minimum = jobq.backends.sqlite.MIN_VERSION
    monkeypatch.setattr("jobq.backends.sqlite.sqlite3.sqlite_version_info", minimum)
    with jobq.Queue.connect(f"sqlite:///{tmp_path}/jobq.sqlite3") as queue:
        install_enqueue_claim(queue)


# -- DSNs -----------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["postgres", "POSTGRES", "PostgreSQL"])
def test_postgres_scheme_is_an_alias(postgresql_dsn: str, scheme: str) -> None:
    alias = f"{scheme}://" + postgresql_dsn.removeprefix("postgresql://")
    assert alias != postgresql_dsn
    with jobq.Queue.connect(alias) as queue:
        assert queue.backend.kind == "postgresql"
        install_enqueue_claim(queue)


def test_mariadb_scheme_is_an_alias(mariadb_dsn: str) -> None:
    alias = "mariadb://" + mariadb_dsn.removeprefix("mysql://")
    assert alias != mariadb_dsn
    with jobq.Queue.connect(alias) as queue:
        assert queue.backend.kind == "mysql"
        install_enqueue_claim(queue)


# -- the default DSN ------------------------------------------------------------------------


def test_jobq_dsn_environment_variable_is_the_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    database, workdir = tmp_path / "from-env.sqlite3", tmp_path / "workdir"
    workdir.mkdir()
    monkeypatch.setenv("JOBQ_DSN", f"sqlite:///{database}")
    monkeypatch.chdir(workdir)  # where the fallback would go, so using it would show
    with jobq.Queue.connect() as queue:
        install_enqueue_claim(queue)
    assert database.is_file()
    assert list(workdir.iterdir()) == []


def test_without_jobq_dsn_the_default_is_sqlite_in_the_working_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("JOBQ_DSN", raising=False)
    monkeypatch.chdir(tmp_path)
    with jobq.Queue.connect() as queue:
        assert queue.backend.kind == "sqlite"
        install_enqueue_claim(queue)
    assert (tmp_path / "jobq.sqlite3").is_file()
