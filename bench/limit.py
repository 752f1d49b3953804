"""The SQL limit: pgbench running exactly jobq's claim and acknowledge statements.

The statements are read from jobq itself (`claim_statement`, `PostgresBackend.sql_complete`),
so the limit moves whenever jobq's SQL does. Only the parameter syntax changes: psycopg's
%(name)s becomes pgbench's :name, and with `-M prepared` pgbench sends them as bind
parameters of a prepared statement, as psycopg does once a statement has run a few times.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

from jobq.backends.postgresql import PostgresBackend, claim_statement

from .app import Noop
from .context import Bench
from .cpu import ServerCpu, children_cpu
from .jobqdb import JobqDb
from .results import Drain

PARAM = re.compile(r"%\((\w+)\)s")
QUOTED = re.compile(r"'(?:[^']|'')*'")

# jobq-supervise's default lease, sent with every claim.
DEFAULT_LEASE = 600.0


def to_pgbench(statement: str, known: set[str]) -> str:
    """One line of pgbench SQL from a psycopg statement with named parameters."""
    names = set(PARAM.findall(statement))
    if names - known:
        raise ValueError(
            f"jobq's statement takes parameters the script does not set: {names - known}"
        )
    if ":" in PARAM.sub("", statement).replace("::", ""):
        # pgbench would read a bare colon as a variable reference.
        raise ValueError("jobq's statement contains a colon that pgbench would misread")
    line = " ".join(PARAM.sub(r":\1", statement).split())
    # Folding whitespace must not touch string literals, or the statement would change.
    if QUOTED.findall(line) != QUOTED.findall(PARAM.sub(r":\1", statement)):
        raise ValueError("a string literal in jobq's statement contains whitespace")
    return line.replace("%%", "%")


def script(lease: float = DEFAULT_LEASE) -> str:
    """A pgbench script: one claim, then the acknowledgement of what it claimed.

    The token is random per claim, like jobq's secrets.token_hex(16); the claimed row's id
    comes back through \\gset, exactly as jobq reads it from RETURNING.
    """
    claim = to_pgbench(claim_statement(False), {"token", "lease"})
    ack = to_pgbench(PostgresBackend.sql_complete, {"id", "token"})
    return (
        "\\set token random(1000000000000000, 9999999999999999)\n"
        f"\\set lease {lease!r}\n"
        f"{claim} \\gset\n"
        f"{ack};\n"
    )


def pgbench_version() -> str:
    out = subprocess.run(["pgbench", "--version"], capture_output=True, text=True, check=False)
    return out.stdout.strip()


def drain(bench: Bench, dsn: str, clients: int, jobs: int) -> Drain:
    """The same preload as jobq's drain, emptied by pgbench with `clients` connections.

    Each client runs jobs // clients scripts: a claim that found nothing would end the
    client with an error, so the total never exceeds what the table holds.
    """
    assert bench.pg is not None
    path = Path(bench.tmp) / "claim_ack.sql"
    path.write_text(script())
    per_client = jobs // clients
    threads = min(clients, os.cpu_count() or 1)
    cmd = [
        "pgbench", "-n", "-M", "prepared", "-c", str(clients), "-j", str(threads),
        "-t", str(per_client), "-f", str(path),
        "-h", "127.0.0.1", "-p", str(bench.pg.port), "-U", "postgres", dsn.rsplit("/", 1)[1],
    ]  # fmt: skip
    settings = f"pgbench -M prepared -c {clients} -j {threads} -t {per_client}"
    result = Drain("limit", "pgbench", "postgresql", clients, per_client * clients)
    result.settings = settings
    db = JobqDb(dsn)
    try:
        db.reset()
        db.preload(Noop(), jobs)
        db.settle()
        result.load = os.getloadavg()[0]
        # pgbench is a C program that starts in milliseconds: its whole run is the window,
        # and its CPU comes from getrusage once it has been reaped.
        server = ServerCpu(bench.pg.data)
        server.begin()
        children_before = children_cpu()
        started = time.monotonic()
        proc = bench.procs.spawn(f"pgbench-c{clients}", cmd, env=bench.env(), cwd="/")
        finished = bench.procs.wait_all([proc], bench.settings.drain_timeout(jobs))
        result.wall = time.monotonic() - started
        server.sample()
        if not finished:
            result.note = "pgbench did not finish in time"
        code = bench.procs.stop(proc, grace=5.0)
        result.client_cpu = children_cpu() - children_before
        result.db_cpu = server.used()
        result.window_jobs = result.jobs
        output = bench.procs.log_of(proc).read_text(errors="replace")
        if code != 0 and not result.note:
            result.note = f"pgbench exited with {code}: {output.strip().splitlines()[-1:]}"
        if m := re.search(r"tps = ([\d.]+) \(without initial connection time\)", output):
            result.settings += f" (pgbench's own tps: {float(m.group(1)):.0f})"
        # Measured like jobq: from the database's completion times.
        result.completed, result.after_first, result.span, _ = db.completion()
    finally:
        db.close()
    return result
