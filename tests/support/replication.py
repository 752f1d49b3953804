"""A PostgreSQL primary and a streaming standby on loopback, and the failover between them:
the primary stopped as a crash would (`-m immediate`), the standby promoted.

Used by tests/system/test_failover.py and the asynchronous measurement
(bench/measures/failover.py).
Both servers are Debian's PostgreSQL run as `postgres` (see servers.py for why).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
from psycopg import sql

from tests.support.servers import IS_ROOT, free_port, fresh_name, postgresql_bin, run, tail

# The primary keeps this much WAL for a standby that falls behind: plenty for a test.
PRIMARY_CONF = """
listen_addresses = '127.0.0.1'
port = {port}
wal_level = replica
max_wal_senders = 10
wal_keep_size = '512MB'
hot_standby = on
max_connections = 200
fsync = off
"""
HBA = "host replication all 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 trust\n"
# A promoted standby alone must not wait for a synchronous standby of its own.
STANDBY_CONF = "port = {port}\nsynchronous_standby_names = ''\n"
READY_TIMEOUT = 30.0


def connect(port: int, dbname: str = "postgres") -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(
        host="127.0.0.1", port=port, user="postgres", dbname=dbname, autocommit=True
    )


def poll(what: str, condition: Callable[[], object], timeout: float = READY_TIMEOUT) -> None:
    """Wait until condition() holds (a connection error counts as "not yet")."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(psycopg.Error):
            if condition():
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


class ReplicatedPair:
    """A primary streaming to a standby, synchronously or not; failover() promotes the
    standby. The multi-host DSN names both, primary first, and connects to the writable one."""

    def __init__(self, base: str, synchronous: bool) -> None:
        self.base, self.synchronous = base, synchronous
        self.ports = (free_port(), free_port())
        self.data = (f"{base}/primary", f"{base}/standby")
        self.logs = (f"{base}/primary.log", f"{base}/standby.log")
        self.as_pg = ["runuser", "-u", "postgres", "--"] if IS_ROOT else []
        self.bin = postgresql_bin()

    def pg_ctl(self, which: int, *args: str) -> None:
        command = [*self.as_pg, f"{self.bin}/pg_ctl", "-D", self.data[which]]
        run([*command, "-l", self.logs[which], "-w", "-t", "60", *args], log=self.logs[which])

    def start(self, relay: int | None = None) -> None:
        """Start both; the standby streams through 127.0.0.1:`relay` (a proxy in front of
        the primary) if given, to delay or cut replication."""
        primary, standby = self.data
        run([*self.as_pg, f"{self.bin}/initdb", "-D", primary, "-U", "postgres",
             "--auth=trust", "-N", "-E", "UTF8", "--locale=C.UTF-8"])  # fmt: skip
        with open(f"{primary}/postgresql.conf", "a") as conf:
            conf.write(PRIMARY_CONF.format(port=self.ports[0]))
        with open(f"{primary}/pg_hba.conf", "a") as hba:
            hba.write(HBA)
        self.pg_ctl(0, "start")
        run([*self.as_pg, f"{self.bin}/pg_basebackup", "-h", "127.0.0.1", "-p",
             str(self.ports[0]), "-U", "postgres", "-D", standby, "-R", "-X", "stream",
             "-c", "fast"])  # fmt: skip
        with open(f"{standby}/postgresql.conf", "a") as conf:
            conf.write(STANDBY_CONF.format(port=self.ports[1]))
        if relay is not None:
            # After the primary_conninfo pg_basebackup -R wrote there, which would override
            # one in postgresql.conf.
            with open(f"{standby}/postgresql.auto.conf", "a") as auto:
                auto.write(f"primary_conninfo = 'host=127.0.0.1 port={relay} user=postgres'\n")
        self.pg_ctl(1, "start")
        with connect(self.ports[0]) as primary_connection:
            poll("the standby to stream", lambda: streaming(primary_connection))
            if self.synchronous:
                # Only now: set before the standby streams, every commit would wait for it.
                primary_connection.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
                primary_connection.execute("SELECT pg_reload_conf()")
                poll("the standby to be synchronous", lambda: streaming(primary_connection, "sync"))

    def dsn(self, dbname: str) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.ports)
        return f"postgresql://postgres@{hosts}/{dbname}?target_session_attrs=read-write"

    def create_database(self) -> str:
        """A fresh database, made on the primary (it replicates); its multi-host DSN."""
        name = fresh_name()
        with connect(self.ports[0]) as primary:
            primary.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.dsn(name)

    def crash_primary(self) -> None:
        """The primary gone at once, as in a crash: no shutdown checkpoint, sessions cut."""
        self.pg_ctl(0, "-m", "immediate", "stop")

    def promote(self) -> None:
        """The standby made the primary; returns once it accepts writes."""
        self.pg_ctl(1, "promote")
        with connect(self.ports[1]) as standby:
            poll("the standby to leave recovery", lambda: not in_recovery(standby))

    def stop(self) -> None:
        for data in self.data:
            if Path(data, "postmaster.pid").exists():
                stop = [*self.as_pg, f"{self.bin}/pg_ctl", "-D", data, "-m", "immediate", "stop"]
                subprocess.run(stop, cwd="/", capture_output=True, check=False)

    def log_tails(self) -> str:
        return "\n".join(f"--- {log} ---\n{tail(log)}" for log in self.logs)


def streaming(primary: psycopg.Connection[tuple[object, ...]], state: str | None = None) -> bool:
    """Whether a standby streams from `primary` (in sync_state `state`, if given)."""
    rows = primary.execute("SELECT state, sync_state FROM pg_stat_replication").fetchall()
    return any(row[0] == "streaming" and state in (None, row[1]) for row in rows)


def in_recovery(connection: psycopg.Connection[tuple[object, ...]]) -> bool:
    row = connection.execute("SELECT pg_is_in_recovery()").fetchone()
    return bool(row and row[0])


@contextlib.contextmanager
def replicated_postgresql(
    synchronous: bool, relay: Callable[[int], int] | None = None
) -> Iterator[ReplicatedPair]:
    """A primary and a streaming standby, started; both removed afterwards. `relay`, given
    the primary's port, returns the port the standby streams through (a proxy's)."""
    base = tempfile.mkdtemp(prefix="jobq-pg-pair-")
    if IS_ROOT:  # mkdtemp dirs are mode 0700, so postgres could not otherwise use it
        shutil.chown(base, "postgres", "postgres")
    pair = ReplicatedPair(base, synchronous)
    try:
        pair.start(None if relay is None else relay(pair.ports[0]))
        yield pair
    finally:
        pair.stop()
        shutil.rmtree(base, ignore_errors=True)
