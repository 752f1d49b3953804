"""The status page behind 1,000,000 jobs: how long the overview and filtered lists take.

    python -m bench.measures.status_page                 # a private PostgreSQL, 1,000,000 jobs
    python -m bench.measures.status_page --dsn DSN --jobs 200000

The jobs are what a busy queue holds: four types, 2% failed, 8% pending (--pending) and
ready, the rest completed, finished over the last 7 days (what `jobq prune` keeps by
default). They are written with jobq's own insert, copied in bulk (JobqDb.preload), then
given their types and statuses in one UPDATE, and VACUUM ANALYZE settles the table. Each
page is requested through the WSGI application in this process (Werkzeug's test client), so
the times are the database's queries plus rendering, without a network. The target is
200 ms. PostgreSQL only: the UPDATE that spreads the statuses is its own SQL. Nothing here
is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from functools import partial
from http import HTTPStatus

from werkzeug.test import Client

from jobq.web import Credentials, make_app

from ..harness.app import Noop
from ..harness.jobqdb import JobqDb
from ..harness.servers import PostgresServer

TARGET_MS = 200.0

PAGES = (
    ("overview", "/"),
    ("failed jobs of one type", "/jobs?status=failed&type=report"),
    ("pending jobs", "/jobs?status=pending"),
    ("completed jobs of one type", "/jobs?status=completed&type=email"),
    ("all jobs, newest first", "/jobs"),
    ("failed jobs, an older page", "/jobs?status=failed&before={middle}"),
    # Nothing matches: the list reads until it has a page or the table ends.
    ("expired jobs of one type (none)", "/jobs?status=expired&type=email"),
    ("one job", "/jobs/{middle}"),
    # The console's filters and charts (issue 58): each filter reads one window of ids.
    ("a payload field (none match)", "/jobs?field=customer.id&equals=42"),
    ("error text among failed jobs", "/jobs?status=failed&error=boom"),
    ("priority and a creation range", "/jobs?priority=0&created_after=2020-01-01T00:00"),
    ("overview, 24 h window", "/?window=24h"),
    ("overview, 7 d window", "/?window=7d"),
    ("the overview's live fragment", "/live"),
    # Nodes and queues (issue 58): the heartbeat rows of NODES supervisors; per type, the
    # overview's counts with the limits and schedules.
    ("nodes", "/nodes"),
    ("queues", "/queues"),
)

# The supervisors whose heartbeats the nodes page reads, each with WORKERS busy workers.
NODES = 20
WORKERS = 8

# Of every 100 jobs by id: {completed} completed, 2 failed, the rest pending.
SPREAD = """
    UPDATE jobq_jobs SET
        type = (ARRAY['email', 'report', 'import', 'thumbnail'])[id / 100 % 4 + 1],
        status = CASE WHEN id % 100 < {completed} THEN 'completed'
                      WHEN id % 100 < {finished} THEN 'failed' ELSE 'pending' END,
        attempts = CASE WHEN id % 100 < {finished} THEN 1 ELSE 0 END,
        last_error = CASE WHEN id % 100 >= {completed} AND id % 100 < {finished}
                          THEN 'RuntimeError: boom' END,
        finished_at = CASE WHEN id % 100 < {finished}
                           THEN now() - make_interval(secs => id * 7 % 604800) END
"""


def load(db: JobqDb, jobs: int, pending: int) -> float:
    started = time.monotonic()
    db.reset()
    db.preload(Noop(), jobs)
    db.execute(SPREAD.format(completed=98 - pending, finished=100 - pending))
    db.execute("DELETE FROM jobq_nodes")
    for node in range(NODES):
        db.queue._beat(f"node-{node}:1:0", f"node-{node}", 1, "bench", heartbeat(node), 3600)
    db.settle()
    return time.monotonic() - started


def heartbeat(node: int) -> str:
    """A supervisor's facts as its housekeeper writes them: one pool, every worker busy."""
    attempt = {"type": "email", "lease_left": 50.0}
    workers = [
        {"pid": 100 + n, "id": f"{node:04x}{n:012x}", "pool": "*", "state": "busy", "jobs": 9,
         "queued": 0, "running": [attempt | {"id": node * WORKERS + n + 1}]}
        for n in range(WORKERS)
    ]  # fmt: skip
    pools = [{"name": "*", "types": [], "workers": WORKERS, "concurrency": 1}]
    facts = {"phase": "running", "pools": pools, "workers": workers, "helpers": []}
    return json.dumps(facts | {"schedules": []})


def timed(call: Callable[[], object], repeat: int) -> list[float]:
    """Milliseconds of each of `repeat` calls, sorted, after 3 that warm the caches."""
    for _ in range(3):
        call()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return sorted(times)


def get(client: Client, path: str) -> None:
    response = client.get(path)
    if response.status_code != HTTPStatus.OK:
        raise RuntimeError(f"{path}: {response.status_code} {response.get_data(as_text=True)}")


def row(name: str, times: list[float]) -> str:
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    return f"| {name} | {statistics.median(times):.1f} | {p95:.1f} | {times[-1]:.1f} |"


def report(db: JobqDb, jobs: int, repeat: int, pending: int) -> str:
    seconds = load(db, jobs, pending)
    middle = db.scalar("SELECT max(id) / 2 FROM jobq_jobs")
    client = Client(make_app(db.queue, credentials=Credentials()))
    lines = [
        f"{jobs:,} jobs, {pending}% of them pending (loaded in {seconds:.0f} s); {repeat} "
        f"requests per page after 3 warm-ups; target {TARGET_MS:.0f} ms.",
        "",
        "| page | median ms | p95 ms | max ms |",
        "|---|---:|---:|---:|",
    ]
    for name, path in PAGES:
        url = path.format(middle=middle)
        lines.append(row(name, timed(partial(get, client, url), repeat)))
    # What the overview is made of, each of the Queue's calls on its own.
    queue = db.queue
    for name, call in (
        ("overview: recent_counts_by_type", queue.recent_counts_by_type),
        ("overview: oldest_ready", queue.oldest_ready),
        ("overview: completions_per_minute", queue.completions_per_minute),
        ("overview: paused", queue.paused),
    ):
        lines.append(row(name, timed(call, repeat)))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.measures.status_page", description=__doc__
    )
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument(
        "--pending",
        type=int,
        default=8,
        choices=range(1, 99),
        metavar="PERCENT",
        help="the share of pending jobs, all ready (default 8): the overview counts every "
        "one of them",
    )
    parser.add_argument("--dsn", help="a PostgreSQL database to use (its jobs table is emptied)")
    args = parser.parse_args(argv)
    server = None
    try:
        dsn = args.dsn
        if dsn is None:
            server = PostgresServer()
            server.start()
            dsn = server.create_database("jobq_status_page")
        db = JobqDb(dsn)
        try:
            print(report(db, args.jobs, args.repeat, args.pending))
        finally:
            db.close()
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
