"""The Python floor: jobq's per-job statement run by psycopg alone, with no jobq around it.

Each process sends exactly jobq's acknowledge-and-claim statement in a loop, on one cursor,
as fast as it can: what any Python worker built on psycopg pays per job before doing anything
of its own. Between the SQL limit (pgbench, in C) and jobq, it shows how much of the gap is
the language and driver, and how much is jobq.

Run as `python -m bench.measures.floor DSN COUNT`; it prints the CPU seconds its loop used.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
import time

import psycopg

from jobq.backends.postgresql.claims import complete_and_claim_statement

from ..harness.context import PYTHON, Bench
from ..harness.results import Drain
from .limit import DEFAULT_LEASE, drain_by

# Where each claim runs, which jobq records with it.
HOST = socket.gethostname()
WORKER = secrets.token_hex(8)

# Tries per statement, as the pgbench limit's --max-tries.
TRIES = 10


def parameters(job_id: int, token: str, new_token: str) -> dict[str, object]:
    """The statement's parameters: acknowledge `job_id` with no result, as a no-op job's
    acknowledgement does, and claim the next job under `new_token`."""
    return {
        "id": job_id, "token": token, "result": None, "new_token": new_token,
        "lease": DEFAULT_LEASE, "host": HOST, "pid": os.getpid(), "worker": WORKER,
    }  # fmt: skip


def loop(dsn: str, count: int) -> float:
    """`count` statements, each acknowledging the previous claim; returns the CPU they used.
    The last claim stays unacknowledged, as in the fused pgbench script."""
    statement = complete_and_claim_statement(False)
    with psycopg.connect(dsn, autocommit=True) as connection:
        cursor = connection.cursor()
        job_id, token = 0, ""
        started = time.process_time()
        for _ in range(count):
            new_token = secrets.token_hex(16)
            params = parameters(job_id, token, new_token)
            for tries_left in reversed(range(TRIES)):
                try:
                    cursor.execute(statement, params)
                    break
                except psycopg.errors.DeadlockDetected:
                    # Rerun, as jobq does and pgbench --max-tries: nothing of it committed.
                    if not tries_left:
                        raise
            row = cursor.fetchone()
            assert row is not None
            job_id, token = row[1], new_token
        return time.process_time() - started


def drain(bench: Bench, dsn: str, clients: int, jobs: int) -> Drain:
    per_client = jobs // clients
    result = Drain("floor", "psycopg", "postgresql", clients, per_client * clients - clients)
    result.settings = f"{clients} processes, psycopg, one cursor each, prepared after 5 runs"
    cmd = [PYTHON, "-m", "bench.measures.floor", dsn, str(per_client)]
    commands = [(f"floor-{i}", cmd) for i in range(clients)]
    ended = drain_by(bench, dsn, result, jobs, commands)
    failed = [output.strip().splitlines()[-1:] for code, output in ended if code != 0]
    if failed and not result.note:
        result.note = f"{len(failed)} process(es) failed: {failed[0]}"
    # The loops' own CPU: interpreter start-up and imports are no part of a job's cost.
    loops = [float(out.rsplit("cpu=", 1)[1]) for code, out in ended if code == 0 and "cpu=" in out]
    if len(loops) == clients:
        result.client_cpu = sum(loops)
    return result


if __name__ == "__main__":
    print(f"cpu={loop(sys.argv[1], int(sys.argv[2])):.6f}")
