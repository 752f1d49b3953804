"""Statement shapes every backend builds alike: a claim's per-type probes merged, the chunks
enqueue_many writes its rows in, and the first schema version's partial indexes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ..attempt_log import HISTORY_LIMIT
from .rows import NewJob

# enqueue_many writes rows in statements of at most this many rows and payload bytes: few
# round trips, while each statement stays well inside MySQL's default 16 MiB packet limit.
CHUNK_ROWS = 5000
CHUNK_BYTES = 4 * 2**20

# What a claim reads of each job it takes, in the order the backends' row readers expect.
CLAIM_COLUMNS = (
    "id, type, class_name, payload, attempts, lease_until, "
    "max_attempts, backoff, max_backoff, jitter, deadline, traceparent, tracestate, checkpoint"
)


# Version 1's partial indexes, the same statements in PostgreSQL and SQLite (MySQL has no
# partial indexes): the claim reads only pending rows, in schedule order, with or without a
# type; maintenance reads the leases and deadlines; pruning the finished rows.
FIRST_INDEXES = (
    "CREATE INDEX IF NOT EXISTS jobq_jobs_ready ON jobq_jobs (scheduled_at, id) "
    "WHERE status = 'pending'",
    "CREATE INDEX IF NOT EXISTS jobq_jobs_ready_by_type ON jobq_jobs (type, scheduled_at, id) "
    "WHERE status = 'pending'",
    "CREATE INDEX IF NOT EXISTS jobq_jobs_leases ON jobq_jobs (lease_until) "
    "WHERE status = 'in_progress'",
    "CREATE INDEX IF NOT EXISTS jobq_jobs_deadlines ON jobq_jobs (deadline) "
    "WHERE status = 'pending' AND deadline IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS jobq_jobs_finished ON jobq_jobs (finished_at) "
    "WHERE finished_at IS NOT NULL",
)


def earliest(probes: Sequence[str], limit: str = "1") -> str:
    """The first row (or first `limit` rows), by (priority descending, scheduled_at, id), of
    several ordered probes of as many rows, one per job type; each probe selects at least
    those three columns.

    Every probe is a range scan of the typed ready index that stops at its first row, so a
    claim costs one short walk per type however many jobs of other types wait ahead. One
    ordered walk over several types cannot do that: it either sorts every ready row of those
    types, or walks the other types' rows in schedule order until it meets one of its own.
    """
    if len(probes) == 1:
        return probes[0]
    merged = " UNION ALL ".join(
        f"SELECT * FROM ({probe}) AS probe{i}" for i, probe in enumerate(probes)
    )
    return f"{merged} ORDER BY priority DESC, scheduled_at, id LIMIT {limit}"


def chunks(jobs: Sequence[NewJob], rows: int) -> Iterator[Sequence[NewJob]]:
    """The rows in runs of at most `rows` rows and about CHUNK_BYTES of payload."""
    start, size = 0, 0
    for end, job in enumerate(jobs):
        if end > start and (end - start == rows or size + len(job.payload) > CHUNK_BYTES):
            yield jobs[start:end]
            start, size = end, 0
        size += len(job.payload)
    if start < len(jobs):
        yield jobs[start:]


def type_params(types: Sequence[str]) -> dict[str, str]:
    """The named parameters of a claim's per-type probes: type0, type1, ..."""
    return {f"type{i}": name for i, name in enumerate(types)}


def attempt_entry(build: str, started: str, finished: str, error: str, error_class: str) -> str:
    """One entry of a job's attempt history (results.AttemptEntry), built in SQL by `build`
    (each database's JSON object function) from the row as the attempt ends: its number,
    its worker, when it began and ended (Unix seconds), and how it failed, if it did."""
    return (
        f"{build}('attempt', attempts, 'worker', worker, 'started_at', {started}, "
        f"'finished_at', {finished}, 'error', {error}, 'error_class', {error_class})"
    )


def history_appended(log: str, length: str, append: str, entry: str) -> str:
    """The SET of attempt_log that appends `entry` while the history holds fewer than
    HISTORY_LIMIT entries: `log` reads the history as JSON ([] when empty), `length` and
    `append` are the database's functions around {log} (and {entry})."""
    return (
        f"attempt_log = CASE WHEN {length.format(log=log)} < {HISTORY_LIMIT} "
        f"THEN {append.format(log=log, entry=entry)} ELSE attempt_log END"
    )
