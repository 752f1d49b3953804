"""Fixtures every test may use: throwaway PostgreSQL and MariaDB servers and a fresh database
per test (the servers themselves are in tests/support/servers.py).

Servers are session-scoped and only start when a test needs them, so `pytest -k sqlite` and the
unit tests start nothing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import jobq

from .support.servers import (
    LocalServer,
    ServerInfo,
    fresh_database,
    fresh_mariadb_database,
    fresh_postgresql_database,
    server_of,
    started_mariadb,
    started_pgbouncer,
    started_postgresql,
)

DB_KINDS = ("sqlite", "postgresql", "mariadb")
# The Django project's own tests are Django's test runner's, run by test_django*.py inside a
# configured project; collected here they would import its models with no settings.
collect_ignore_glob = ["support/*"]


@pytest.fixture(autouse=True)
def jobq_logger_restored() -> Iterator[None]:
    """Put jobq's logger back as it was: a test that runs a command in-process configures it
    onto the stream pytest captured for that test, which is closed by the time a later test
    in the same process logs."""
    logger = logging.getLogger("jobq")
    handlers, level, propagate = logger.handlers[:], logger.level, logger.propagate
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)
    logger.propagate = propagate


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "databases(*kinds): run a test that uses `dsn` only on these kinds "
        f"(any of {', '.join(DB_KINDS)})",
    )
    config.addinivalue_line(
        "markers",
        "lease(seconds): the lease of the `queue` fixture's claims (default jobq's own, 600 s)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Parametrizing here, not in the fixture, means excluded kinds are never generated at all.
    if "db_kind" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("databases")
    kinds = list(marker.args) if marker else list(DB_KINDS)
    unknown = set(kinds) - set(DB_KINDS)
    if unknown or not kinds:
        raise pytest.UsageError(
            f"{metafunc.definition.nodeid}: @pytest.mark.databases{tuple(kinds)}: "
            f"expected one or more of {DB_KINDS}"
        )
    metafunc.parametrize("db_kind", kinds, indirect=True, ids=kinds)


@pytest.fixture(scope="session")
def postgresql_server() -> Iterator[ServerInfo]:
    with started_postgresql() as server:
        yield server.info


@pytest.fixture(scope="session")
def mariadb_server() -> Iterator[ServerInfo]:
    with started_mariadb() as server:
        yield server.info


@pytest.fixture(scope="session")
def mariadb_statement_binlog_server() -> Iterator[ServerInfo]:
    """A MariaDB that binary-logs in STATEMENT format, which jobq must refuse.

    Its own server, because turning the binary log on takes a restart, and the shared one
    should stay as close to a default install as possible.
    """

    def binlog(base: str) -> list[str]:
        # server-id 1 is MariaDB's default; spelled out as a real primary's config would.
        return [f"--log-bin={base}/binlog", "--binlog-format=STATEMENT", "--server-id=1"]

    with started_mariadb(binlog) as server:
        yield server.info


@pytest.fixture
def db_kind(request: pytest.FixtureRequest) -> str:
    """The kind of database behind `dsn`: "sqlite", "postgresql" or "mariadb"."""
    kind: str = request.param
    return kind


@pytest.fixture
def dsn(db_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A DSN for a fresh, empty database of each kind (see the `databases` marker)."""
    with fresh_database(db_kind, server_of(db_kind, request), tmp_path / "jobq.sqlite3") as url:
        yield url


@pytest.fixture
def queue(dsn: str, request: pytest.FixtureRequest) -> Iterator[jobq.Queue]:
    """A queue on the test's database, installed; its lease from the `lease` marker."""
    marker = request.node.get_closest_marker("lease")
    lease = marker.args[0] if marker else 600
    with jobq.Queue.connect(dsn, lease_duration=lease) as queue:
        queue.install()
        yield queue


@pytest.fixture
def postgresql_dsn(postgresql_server: ServerInfo) -> Iterator[str]:
    with fresh_postgresql_database(postgresql_server) as url:
        yield url


@pytest.fixture
def mariadb_dsn(mariadb_server: ServerInfo) -> Iterator[str]:
    with fresh_mariadb_database(mariadb_server) as url:
        yield url


@pytest.fixture(scope="session")
def pgbouncer_server(postgresql_server: ServerInfo) -> Iterator[ServerInfo]:
    """PgBouncer in transaction-pooling mode in front of the session's PostgreSQL."""
    with started_pgbouncer(postgresql_server) as server:
        yield server


@pytest.fixture
def pooled_dsns(
    postgresql_server: ServerInfo, pgbouncer_server: ServerInfo
) -> Iterator[tuple[str, str]]:
    """A fresh database, as (a DSN through PgBouncer with pool_mode=transaction, a direct
    DSN)."""
    with fresh_postgresql_database(postgresql_server) as direct:
        name = direct.rsplit("/", 1)[1]
        pooled = (
            f"postgresql://postgres@{pgbouncer_server.host}:{pgbouncer_server.port}/{name}"
            "?pool_mode=transaction"
        )
        yield pooled, direct


@pytest.fixture
def restartable_server(db_kind: str) -> Iterator[LocalServer]:
    """A PostgreSQL or MariaDB server (by `db_kind`) of this test's own, which it may restart
    while jobs run; the session servers stay up for every other test."""
    servers: dict[str, Callable[[], contextlib.AbstractContextManager[LocalServer]]] = {
        "postgresql": started_postgresql,
        "mariadb": started_mariadb,
    }
    if db_kind not in servers:
        raise pytest.UsageError(f"restartable_server: no restartable {db_kind} server")
    with servers[db_kind]() as server:
        yield server


@pytest.fixture
def restartable_dsn(restartable_server: LocalServer, db_kind: str) -> Iterator[str]:
    """A fresh database on `restartable_server`."""
    fresh = fresh_postgresql_database if db_kind == "postgresql" else fresh_mariadb_database
    with fresh(restartable_server.info) as url:
        yield url
