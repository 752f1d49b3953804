"""The start-time warning that a failover could lose commits jobq was told of: it fires on a
real primary streaming to an asynchronous standby, not once that standby is synchronous,
and again when the database's own `synchronous_commit` stops commits waiting for it.

One primary and standby, set up in turn as each case needs; the synchronous failover run of
test_failover.py checks that a real supervisor start stays quiet there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from psycopg import sql

from jobq import backends
from jobq.supervisor.appcheck import warn_of_failover_risk
from tests.support.replication import connect, poll, replicated_postgresql, streaming


@dataclass
class Warned:
    """What the start said of each replication setting: the warning lines, by case."""

    asynchronous: list[str]
    synchronous: list[str]
    commit_local: list[str]


def warnings_at_start(dsn: str) -> list[str]:
    """The warnings the supervisor's start check logs for `dsn`."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if getattr(record, "event", None) == "failover_risk":
                lines.append(record.getMessage())

    jobq_log = logging.getLogger("jobq")
    handler = Keep(logging.WARNING)
    jobq_log.addHandler(handler)
    try:
        warn_of_failover_risk(dsn)
    finally:
        jobq_log.removeHandler(handler)
    return lines


@pytest.fixture(scope="module")
def warned() -> Iterator[Warned]:
    with replicated_postgresql(synchronous=False) as pair:
        dsn = pair.create_database()
        asynchronous = warnings_at_start(dsn)
        with connect(pair.ports[0]) as primary:
            primary.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
            primary.execute("SELECT pg_reload_conf()")
            poll("the standby to be synchronous", lambda: streaming(primary, "sync"))
            synchronous = warnings_at_start(dsn)
            name = dsn.rsplit("/", 1)[1].split("?")[0]
            primary.execute(
                sql.SQL("ALTER DATABASE {} SET synchronous_commit = local").format(
                    sql.Identifier(name)
                )
            )
            commit_local = warnings_at_start(dsn)
        yield Warned(asynchronous, synchronous, commit_local)


def test_an_asynchronous_standby_is_warned_of(warned: Warned) -> None:
    assert len(warned.asynchronous) == 1, warned
    assert "none of them synchronous" in warned.asynchronous[0]
    assert "needs synchronous replication" in warned.asynchronous[0]


def test_a_synchronous_standby_is_not(warned: Warned) -> None:
    assert warned.synchronous == []


def test_commits_that_do_not_wait_for_the_synchronous_standby_are(warned: Warned) -> None:
    assert len(warned.commit_local) == 1, warned
    assert "synchronous_commit is local" in warned.commit_local[0]


def test_a_single_server_and_sqlite_say_nothing(postgresql_dsn: str, tmp_path: Path) -> None:
    for dsn in (postgresql_dsn, f"sqlite:///{tmp_path}/jobq.sqlite3"):
        backend = backends.connect(dsn)
        try:
            assert backend.failover_risk() is None
        finally:
            backend.close()
