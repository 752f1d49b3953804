"""The SQL limit: pgbench running exactly jobq's claim and acknowledge statements.

The statements are read from jobq itself, so the limit moves whenever jobq's SQL does. Only
the parameter syntax changes: psycopg's %(name)s becomes pgbench's :name, and with
`-M prepared` pgbench sends them as bind parameters of a prepared statement, as psycopg does
once a statement has run a few times.

Two scripts. "pgbench" is what a jobq worker sends per job in a steady drain: the
acknowledgement fused with the next claim (`complete_and_claim_statement`), one statement
and one commit. "two statements" is a claim (`claim_statement`) then its acknowledgement
(`PostgresBackend.sql_complete`): what jobq sent per job before the two were fused, and
still sends when a worker acknowledges without claiming again (draining, recycling).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

from jobq.backends.postgresql import PostgresBackend
from jobq.backends.postgresql.claims import claim_statement, complete_and_claim_statement

from ..harness.app import Noop
from ..harness.context import Bench
from ..harness.cpu import Meter, ServerCpu, children_cpu
from ..harness.jobqdb import JobqDb, wait_drained
from ..harness.memory import PeakMemory
from ..harness.results import Drain

PARAM = re.compile(r"%\((\w+)\)s")
QUOTED = re.compile(r"'(?:[^']|'')*'")

# How long clients that drained the table may take to exit.
EXIT_GRACE = 30.0

# jobq-supervise's default lease, sent with every claim.
DEFAULT_LEASE = 600.0


# A job's result: NULL for the usual job, which returns nothing.
NULLS = frozenset({"result"})


def to_pgbench(statement: str, known: set[str], nulls: frozenset[str] = NULLS) -> str:
    """One line of pgbench SQL from a psycopg statement with named parameters; those of
    `nulls` are NULL, which a pgbench variable cannot be."""
    for name in nulls:
        statement = statement.replace(f"%({name})s", "NULL")
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


TOKEN = "random(1000000000000000, 9999999999999999)"

# Where a claim runs, which jobq records with it (the worker's id too): set once per client
# with -D.
RUNNER = ["-D", "host=pgbench", "-D", "pid=1", "-D", "worker=pgbench"]

# Limit variants: the name in the results, and whether it is the fused statement.
FUSED = "pgbench"
TWO_STATEMENTS = "two statements"


def script(lease: float = DEFAULT_LEASE) -> str:
    """A pgbench script: one claim, then the acknowledgement of what it claimed.

    The token is random per claim, like jobq's secrets.token_hex(16); the claimed row's id
    comes back through \\gset, exactly as jobq reads it from RETURNING.
    """
    claim = to_pgbench(claim_statement(False), {"token", "lease", "host", "pid", "worker"})
    ack = to_pgbench(PostgresBackend.sql_complete, {"id", "token"})
    return f"\\set token {TOKEN}\n\\set lease {lease!r}\n{claim} \\gset\n{ack};\n"


def fused_script(lease: float = DEFAULT_LEASE) -> str:
    """A pgbench script: acknowledge the previous claim and claim the next job, in jobq's one
    statement. The client starts with id 0 (-D), so its first run acknowledges nothing; its
    last claim is left in progress, as a worker's would be when the queue runs dry."""
    known = {"id", "token", "new_token", "lease", "host", "pid", "worker"}
    fused = to_pgbench(complete_and_claim_statement(False), known)
    return (
        f"\\set new_token {TOKEN}\n\\set lease {lease!r}\n{fused} \\gset\n\\set token :new_token\n"
    )


def pgbench_version() -> str:
    out = subprocess.run(["pgbench", "--version"], capture_output=True, text=True, check=False)
    return out.stdout.strip()


def drain(bench: Bench, dsn: str, clients: int, jobs: int, variant: str = FUSED) -> Drain:
    """The same preload as jobq's drain, emptied by pgbench with `clients` connections.

    Each client runs jobs // clients scripts: a claim that found nothing would end the
    client with an error, so the total never exceeds what the table holds. With the fused
    script each client's last claim stays unacknowledged, so clients fewer jobs complete.
    """
    assert bench.pg is not None
    fused = variant == FUSED
    path = Path(bench.tmp) / ("ack_claim.sql" if fused else "claim_ack.sql")
    path.write_text(fused_script() if fused else script())
    per_client = jobs // clients
    threads = min(clients, os.cpu_count() or 1)
    start = [*RUNNER, *(["-D", "id=0", "-D", "token=0"] if fused else [])]
    cmd = [
        "pgbench", "-n", "-M", "prepared", "-c", str(clients), "-j", str(threads),
        "-t", str(per_client), "-f", str(path), *start, "--max-tries", "10",
        "-h", "127.0.0.1", "-p", str(bench.pg.port), "-U", "postgres", dsn.rsplit("/", 1)[1],
    ]  # fmt: skip
    settings = f"pgbench -M prepared -c {clients} -j {threads} -t {per_client}"
    acknowledged = per_client * clients - (clients if fused else 0)
    result = Drain("limit", variant, "postgresql", clients, acknowledged)
    result.settings = f"{settings}, {'one fused statement' if fused else 'claim then ack'}"
    # pgbench is a C program that starts in milliseconds: its whole run is the window, and
    # its CPU comes from getrusage once it has been reaped.
    ((code, output),) = drain_by(bench, dsn, result, jobs, [(f"pgbench-c{clients}", cmd)])
    if code != 0 and not result.note:
        result.note = f"pgbench exited with {code}: {output.strip().splitlines()[-1:]}"
    if m := re.search(r"tps = ([\d.]+) \(without initial connection time\)", output):
        result.settings += f" (pgbench's own tps: {float(m.group(1)):.0f})"
    return result


def drain_by(
    bench: Bench, dsn: str, result: Drain, jobs: int, commands: list[tuple[str, list[str]]]
) -> list[tuple[int, str]]:
    """Preload `jobs`, run `commands` (name, argv) at once until they exit, and fill in
    `result` from the database's completion times; returns each command's (exit code, log).

    While they run, the bench watches them as it watches jobq and the peers: the table
    polled for what is left, the process trees and the server sampled for CPU, the trees for
    memory. Watching costs the two shared cores CPU, and a floor drained unwatched was
    flattered against jobq by it. Their CPU still comes from their own accounts over the
    whole run (pgbench starts in milliseconds; the floor reports its loop's), so the
    meter's samples serve only to cost the same.
    """
    assert bench.pg is not None
    db = JobqDb(dsn)
    try:
        db.reset()
        db.preload(Noop(), jobs)
        db.settle()
        result.load = os.getloadavg()[0]
        server = ServerCpu(bench.pg.data)
        server.begin()
        children_before = children_cpu()
        started = time.monotonic()
        procs = [bench.procs.spawn(name, cmd, env=bench.env(), cwd="/") for name, cmd in commands]
        pids = [proc.pid for proc in procs]
        # Claims a client leaves unacknowledged as it ends are not left to drain.
        unacknowledged = jobs - result.jobs
        with PeakMemory(pids) as memory:
            wait_drained(
                lambda: max(0, db.unfinished() - unacknowledged), result.jobs,
                lambda: "" if any(p.poll() is None for p in procs) else "exited",
                Meter(pids, bench.pg.data),
            )  # fmt: skip
        # Drained, or out of time: either way they are about to end.
        finished = bench.procs.wait_all(procs, EXIT_GRACE)
        result.wall = time.monotonic() - started
        server.sample()
        result.memory = memory.summary
        if not finished:
            result.note = f"{commands[0][0]} did not finish in time"
        codes = [bench.procs.stop(proc, grace=5.0) for proc in procs]
        result.client_cpu = children_cpu() - children_before
        result.db_cpu = server.used()
        result.window_jobs = result.jobs
        outputs = [bench.procs.log_of(proc).read_text(errors="replace") for proc in procs]
        # Measured like jobq: from the database's completion times.
        result.completed, result.after_first, result.span, _ = db.completion()
    finally:
        db.close()
    return list(zip(codes, outputs, strict=True))
