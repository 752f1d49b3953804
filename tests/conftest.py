"""Throwaway PostgreSQL and MariaDB servers and a fresh database per test.

Servers are session-scoped and only start when a test needs them, so `pytest -k sqlite` starts
nothing. Tests run as root (CI does), and PostgreSQL refuses to, hence runuser for its commands.
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

import psycopg
import pymysql
import pytest
from psycopg import sql

DB_KINDS = ("sqlite", "postgresql", "mariadb")
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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "databases(*kinds): run a test that uses `dsn` only on these kinds "
        f"(any of {', '.join(DB_KINDS)})",
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


def _free_port() -> int:
    # Another process may grab the port before the server binds it; rare enough to accept.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _tail(path: str, lines: int = 40) -> str:
    try:
        return "".join(Path(path).read_text(errors="replace").splitlines(True)[-lines:])
    except OSError as exc:
        return f"(cannot read {path}: {exc})"


def _run(cmd: Sequence[str], *, log: str | None = None, timeout: float = 120) -> None:
    try:
        proc = subprocess.run(
            cmd, cwd="/", stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
        )
        failure = None if proc.returncode == 0 else f"exit {proc.returncode}"
        output = (proc.stdout or "") + (proc.stderr or "")
    except (OSError, subprocess.TimeoutExpired) as exc:
        failure, output = str(exc), ""
    if failure:
        extra = f"\n--- tail of {log} ---\n{_tail(log)}" if log else ""
        raise RuntimeError(f"`{shlex.join(cmd)}` failed ({failure}):\n{output}{extra}")


def _postgresql_bin() -> Path:
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
        self.pg_ctl = [*as_pg, f"{_postgresql_bin()}/pg_ctl", "-D", self.data]
        self.initdb = [*as_pg, f"{_postgresql_bin()}/initdb", "-D", self.data]
        self.info = ServerInfo("127.0.0.1", port, "postgres", self.data)

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off"
            " -c synchronous_commit=off -c max_connections=200"
        )
        start = [*self.pg_ctl, "-l", self.log, "-w", "-t", "60", "-o", options, "start"]
        _run(start, log=self.log)

    def stop(self, mode: str = "fast") -> None:
        # "fast" ends every session and writes a checkpoint: with synchronous_commit=off, only
        # a clean shutdown keeps every commit a client was told about.
        _run([*self.pg_ctl, "-m", mode, "-w", "-t", "60", "stop"], log=self.log)


@contextlib.contextmanager
def _postgresql() -> Iterator[PostgresqlServer]:
    """A throwaway PostgreSQL cluster, started; removed afterwards."""
    base = tempfile.mkdtemp(prefix="jobq-pg-")
    if IS_ROOT:  # mkdtemp dirs are mode 0700, so postgres could not otherwise use it
        shutil.chown(base, "postgres", "postgres")
    server = PostgresqlServer(base, _free_port())
    try:
        initdb_args = ["-U", "postgres", "--auth=trust", "-N", "-E", "UTF8", "--locale=C.UTF-8"]
        _run([*server.initdb, *initdb_args])
        server.start()
        yield server
    finally:
        if Path(server.data, "postmaster.pid").exists():
            stop = [*server.pg_ctl, "-m", "immediate", "-w", "stop"]
            subprocess.run(stop, cwd="/", capture_output=True, check=False)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgresql_server() -> Iterator[ServerInfo]:
    with _postgresql() as server:
        yield server.info


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
                        f"\n--- tail of {self.log} ---\n{_tail(self.log)}"
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
def _mariadb(extra_args: Callable[[str], Sequence[str]] | None = None) -> Iterator[MariadbServer]:
    """A throwaway MariaDB; `extra_args` gets the server's private directory, for paths."""
    base = tempfile.mkdtemp(prefix="jobq-mariadb-")
    data, log, sock, port = f"{base}/data", f"{base}/error.log", f"{base}/mysqld.sock", _free_port()
    # --no-defaults keeps /etc/mysql out of it; root has to be named explicitly or mariadbd aborts.
    user = ["--user=root"] if IS_ROOT else []
    server: MariadbServer | None = None
    try:
        common = ["--no-defaults", *user, f"--datadir={data}"]
        auth = "--auth-root-authentication-method=normal"
        _run(["mariadb-install-db", *common, auth, "--skip-test-db"])
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


@pytest.fixture(scope="session")
def mariadb_server() -> Iterator[ServerInfo]:
    with _mariadb() as server:
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

    with _mariadb(binlog) as server:
        yield server.info


def _fresh_name() -> str:
    return f"jobq_test_{uuid.uuid4().hex[:12]}"


@contextlib.contextmanager
def _postgresql_database(server: ServerInfo) -> Iterator[str]:
    name = _fresh_name()
    params = {"host": server.host, "port": server.port, "user": server.user, "dbname": "postgres"}
    with psycopg.connect(**params, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield f"postgresql://{server.user}@{server.host}:{server.port}/{name}"
    finally:
        # FORCE so connections a failed test leaked do not make the drop fail.
        with psycopg.connect(**params, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@contextlib.contextmanager
def _mariadb_database(server: ServerInfo) -> Iterator[str]:
    name = _fresh_name()
    params = {"host": server.host, "port": server.port, "user": server.user, "password": ""}
    with pymysql.connect(**params, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    try:
        yield f"mysql://{server.user}@{server.host}:{server.port}/{name}"
    finally:
        with pymysql.connect(**params, autocommit=True) as conn, conn.cursor() as cur:
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


@pytest.fixture
def db_kind(request: pytest.FixtureRequest) -> str:
    """The kind of database behind `dsn`: "sqlite", "postgresql" or "mariadb"."""
    kind: str = request.param
    return kind


@pytest.fixture
def dsn(db_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A DSN for a fresh, empty database of each kind (see the `databases` marker)."""
    if db_kind == "sqlite":
        yield f"sqlite:///{tmp_path}/jobq.sqlite3"
        return
    fresh = _postgresql_database if db_kind == "postgresql" else _mariadb_database
    with fresh(request.getfixturevalue(f"{db_kind}_server")) as url:
        yield url


@pytest.fixture
def postgresql_dsn(postgresql_server: ServerInfo) -> Iterator[str]:
    with _postgresql_database(postgresql_server) as url:
        yield url


@pytest.fixture
def mariadb_dsn(mariadb_server: ServerInfo) -> Iterator[str]:
    with _mariadb_database(mariadb_server) as url:
        yield url


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


@pytest.fixture(scope="session")
def pgbouncer_server(postgresql_server: ServerInfo) -> Iterator[ServerInfo]:
    """Debian's PgBouncer in transaction-pooling mode in front of the session's PostgreSQL,
    as production setups put one. It refuses to run as root, hence runuser."""
    base = tempfile.mkdtemp(prefix="jobq-pgbouncer-")
    port = _free_port()
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
        _run([*as_pg, pgbouncer, "-d", str(ini)], log=log)
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
                    raise RuntimeError(f"PgBouncer not ready: {exc}\n{_tail(log)}") from exc
                time.sleep(0.1)
        yield ServerInfo("127.0.0.1", port, "postgres", base)
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(Path(base, "pgbouncer.pid").read_text()), signal.SIGTERM)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pooled_dsns(
    postgresql_server: ServerInfo, pgbouncer_server: ServerInfo
) -> Iterator[tuple[str, str]]:
    """A fresh database, as (a DSN through PgBouncer with pool_mode=transaction, a direct
    DSN)."""
    with _postgresql_database(postgresql_server) as direct:
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
        "postgresql": _postgresql,
        "mariadb": _mariadb,
    }
    if db_kind not in servers:
        raise pytest.UsageError(f"restartable_server: no restartable {db_kind} server")
    with servers[db_kind]() as server:
        yield server


@pytest.fixture
def restartable_dsn(restartable_server: LocalServer, db_kind: str) -> Iterator[str]:
    """A fresh database on `restartable_server`."""
    fresh = _postgresql_database if db_kind == "postgresql" else _mariadb_database
    with fresh(restartable_server.info) as url:
        yield url
