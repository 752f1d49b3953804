"""Private database servers for one bench run: PostgreSQL 15 and MariaDB, on loopback only.

Durability stays at each server's defaults (PostgreSQL fsync and synchronous_commit on,
InnoDB innodb_flush_log_at_trx_commit=1): a queue that acknowledges durably is what is measured.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pymysql
from psycopg import sql

from .procs import Processes, free_port, tail

IS_ROOT = os.geteuid() == 0


def postgres_bin() -> Path:
    found = sorted(
        (Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/pg_ctl")),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1]
    if pg_ctl := shutil.which("pg_ctl"):
        return Path(pg_ctl).resolve().parent
    raise RuntimeError("PostgreSQL server binaries not found (apt-get install postgresql-15)")


def run(cmd: list[str], timeout: float = 120) -> None:
    # cwd "/": as root, commands run as `postgres`, which cannot enter /root.
    proc = subprocess.run(
        cmd, cwd="/", stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}"
        )


class PostgresServer:
    """initdb + pg_ctl in a temp dir, as the `postgres` user when we are root."""

    def __init__(self) -> None:
        self.bin = postgres_bin()
        self.base = Path(tempfile.mkdtemp(prefix="jobq-bench-pg-"))
        if IS_ROOT:  # mkdtemp makes a 0700 dir that postgres could not enter otherwise
            shutil.chown(self.base, "postgres", "postgres")
        self.data = self.base / "data"
        self.log = self.base / "postgresql.log"
        self.port = free_port()
        self.started = False

    def as_pg(self, *cmd: str) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *cmd] if IS_ROOT else list(cmd)

    def start(self) -> None:
        run(
            self.as_pg(
                str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres",
                "--auth=trust", "-N", "-E", "UTF8", "--locale=C.UTF-8",
            )
        )  # fmt: skip
        # Only what the bench needs changes: loopback, a private socket dir, enough
        # connections for 16 workers plus peers' pools, and pg_stat_statements to count the
        # renewal round's statements. fsync and synchronous_commit keep their defaults (on).
        options = (
            f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 "
            "-c max_connections=300 -c shared_preload_libraries=pg_stat_statements"
        )
        self.started = True
        run(
            self.as_pg(
                str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
                "-w", "-t", "60", "-o", options, "start",
            )
        )  # fmt: skip

    def stop(self) -> None:
        if self.started and (self.data / "postmaster.pid").exists():
            # Fast, not immediate: nothing here needs keeping, but a clean stop is quick too.
            subprocess.run(
                self.as_pg(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w",
                           "-t", "60", "stop"),
                cwd="/", capture_output=True, check=False, timeout=90,
            )  # fmt: skip
        self.started = False
        shutil.rmtree(self.base, ignore_errors=True)

    def dsn(self, dbname: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def connect(self, dbname: str = "postgres") -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.dsn(dbname), autocommit=True)

    def create_database(self, name: str) -> str:
        with self.connect() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        with self.connect(name) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        return self.dsn(name)

    def settings(self) -> dict[str, str]:
        names = ("server_version", "fsync", "synchronous_commit", "wal_sync_method",
                 "shared_buffers", "max_connections", "listen_addresses")  # fmt: skip
        with self.connect() as conn:
            return {name: str(conn.execute(f"SHOW {name}").fetchone()[0]) for name in names}  # type: ignore[index]


class MariadbServer:
    """mariadb-install-db + mariadbd in a temp dir, with InnoDB's durable defaults."""

    def __init__(self, procs: Processes) -> None:
        self.procs = procs
        self.base = Path(tempfile.mkdtemp(prefix="jobq-bench-mariadb-"))
        self.data = self.base / "data"
        self.log = self.base / "error.log"
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        # --no-defaults keeps /etc/mysql out; root must be named or mariadbd refuses to run.
        common = ["--no-defaults", *(["--user=root"] if IS_ROOT else []), f"--datadir={self.data}"]
        run(["mariadb-install-db", *common, "--auth-root-authentication-method=normal",
             "--skip-test-db"])  # fmt: skip
        mariadbd = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
        self.proc = self.procs.spawn(
            "mariadbd",
            [
                mariadbd, *common,
                f"--socket={self.base}/mysqld.sock", f"--pid-file={self.base}/mysqld.pid",
                f"--port={self.port}", "--bind-address=127.0.0.1", "--skip-name-resolve",
                f"--log-error={self.log}", "--max-connections=300",
                "--character-set-server=utf8mb4", "--collation-server=utf8mb4_unicode_ci",
            ],
            cwd="/",
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                self.connect().close()
                return
            except pymysql.err.OperationalError as error:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"mariadbd did not start: {error}\n{tail(self.log)}"
                    ) from error
                time.sleep(0.1)

    def connect(self, db: str | None = None) -> pymysql.connections.Connection:
        return pymysql.connect(
            host="127.0.0.1", port=self.port, user="root", password="", database=db,
            autocommit=True, connect_timeout=5,
        )  # fmt: skip

    def create_database(self, name: str) -> str:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(
                    f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
                )
        finally:
            conn.close()
        return f"mysql://root@127.0.0.1:{self.port}/{name}"

    def settings(self) -> dict[str, str]:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT VERSION(), @@innodb_flush_log_at_trx_commit, @@sync_binlog, "
                    "@@log_bin, @@innodb_buffer_pool_size"
                )
                row = cur.fetchone()
        finally:
            conn.close()
        assert row is not None
        keys = ("version", "innodb_flush_log_at_trx_commit", "sync_binlog", "log_bin",
                "innodb_buffer_pool_size")  # fmt: skip
        return {k: str(v) for k, v in zip(keys, row, strict=True)}

    def stop(self) -> None:
        if self.proc is not None:
            self.procs.stop(self.proc, grace=30.0)  # SIGTERM is mariadbd's clean shutdown
            self.proc = None
        shutil.rmtree(self.base, ignore_errors=True)
