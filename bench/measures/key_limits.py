"""The limits section (issue 29): 20,000 no-op jobs spread over 1,000 keys, drained at a
concurrency limit of one attempt per key, against the same jobs and drain without a limit.
The target is a ratio of at least 0.7: the limit's triggers (a key's lock and count at each
claim, a wake-up at each ending) must not cost the drain more than 30%.

The keys take turns in the enqueue order (job i has key i mod 1,000), as jobs of many
customers arrive. A third drain enqueues each key's 20 jobs together, the order in which
claims would meet a running key's jobs all the time; since they are enqueued in one batch,
each key's jobs beyond its limit are written blocked, out of the claims' way, and the
acknowledgement that frees a key's slot claims its next job (on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from ..harness.app import Keyed, KeyedLimited
from ..harness.context import Bench
from ..harness.jobqdb import JobqDb
from ..harness.results import Drain
from .drain import Variant, drain

JOBS = 20_000
KEYS = 1_000
TARGET = 0.7
WORKERS = 8  # or the run's nearest worker count

Measure = Callable[[str, Callable[[], Drain]], Drain | None]


def load(job: type[Keyed], grouped: bool, db: JobqDb) -> None:
    keys = (i * KEYS // JOBS if grouped else i % KEYS for i in range(JOBS))
    db.queue.enqueue_many([job(key) for key in keys])


def spread(dsn: str) -> str:
    """How the drain just run shared the keys among its workers: a key's jobs run on the
    worker that claimed its first, since each acknowledgement claims its keys' next jobs."""
    db = JobqDb(dsn)
    try:
        rows = db.rows(
            "SELECT count(DISTINCT limit_key), count(*) FROM jobq_jobs "
            "WHERE status = 'completed' GROUP BY worker ORDER BY 1 DESC, 2 DESC"
        )
    finally:
        db.close()
    return "keys (jobs) per worker " + ", ".join(f"{keys:,} ({jobs:,})" for keys, jobs in rows)


def section(bench: Bench, dsn: str, workers: int, measure: Measure) -> None:
    """The three drains at `workers`, back to back, and the ratios in the notes."""
    found: dict[str, Drain | None] = {}
    for name, job, grouped in (
        ("1,000 keys", Keyed, False),
        ("1,000 keys, concurrency 1 a key", KeyedLimited, False),
        ("1,000 keys grouped, concurrency 1 a key", KeyedLimited, True),
    ):
        how = Variant(name, load=partial(load, job, grouped))
        found[name] = measure(f"{name} W={workers}", partial(drain, bench, dsn, workers, JOBS, how))
        if found[name] is not None and job is KeyedLimited:
            bench.note(f"limits, {name}: {spread(dsn)}")
    plain = found.pop("1,000 keys")
    for name, limited in found.items():
        if plain is not None and limited is not None and plain.rate > 0:
            ratio = limited.rate / plain.rate
            verdict = "meets" if ratio >= TARGET else "misses"
            bench.note(
                f"limits, {name}: {limited.rate:,.0f} against {plain.rate:,.0f} jobs/s at "
                f"W={workers}, {ratio:.2f}x ({verdict} the {TARGET}x target)"
            )
