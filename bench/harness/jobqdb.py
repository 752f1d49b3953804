"""jobq's table on any of its databases: reset, preload, count, and completion times."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import jobq

from .app import Noop
from .context import PYTHON, Bench, drain_timeout
from .cpu import Meter

# Every column but id: a preloaded row is a copy of one that jobq's own enqueue() wrote.
COLUMNS = (
    "type, class_name, payload, status, attempts, max_attempts, backoff, max_backoff, jitter, "
    "token, lease_until, scheduled_at, deadline, last_error, created_at, updated_at, finished_at"
)

# Completion span in seconds, per database: the first to the last finished_at of completed
# jobs (see COMPLETION).
SPAN = {
    "postgresql": "extract(epoch FROM max(finished_at) - min(finished_at))",
    "mysql": "TIMESTAMPDIFF(MICROSECOND, min(finished_at), max(finished_at)) / 1e6",
    "sqlite": "max(finished_at) - min(finished_at)",
}

# (completed, completed after the first completion time, span): plain SQL for all three. The
# first completion time is an uncorrelated subquery, computed once: as a joined aggregate,
# statistics from before the drain (no job completed) planned it as the inner side of a
# nested loop, recomputed for each of 50,000 rows (ten minutes on PostgreSQL).
COMPLETION = (
    "SELECT count(*), sum(CASE WHEN finished_at > (SELECT min(finished_at) FROM {rows} "
    ") THEN 1 ELSE 0 END), {span} FROM {rows}"
)
# The completions a rate is read from: every one, or the earliest `first` ({limit}).
COMPLETED = "(SELECT finished_at FROM jobq_jobs WHERE status = 'completed'{limit}) AS done"

DATABASE_NAMES = {"postgresql": "postgresql", "mysql": "mariadb", "sqlite": "sqlite"}


class JobqDb:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.queue = jobq.Queue.connect(dsn)
        self.kind = self.queue.backend.kind
        self.queue.install()

    def close(self) -> None:
        self.queue.close()

    def execute(self, sql: str) -> None:
        self.queue.backend.execute(sql)

    def rows(self, sql: str) -> list[Any]:
        return self.queue.backend.fetchall(sql)

    def scalar(self, sql: str) -> Any:
        return self.rows(sql)[0][0]

    def reset(self) -> None:
        if self.kind == "postgresql":
            self.execute("TRUNCATE jobq_jobs RESTART IDENTITY")
        elif self.kind == "mysql":
            self.execute("TRUNCATE TABLE jobq_jobs")
        else:
            self.execute("DELETE FROM jobq_jobs")

    def preload(self, job: jobq.Job, count: int) -> None:
        """`count` pending copies of `job`: one written by jobq's enqueue(), the rest copied
        from it (see copy)."""
        if count <= 0:
            return
        self.copy(self.queue.enqueue(job), count)

    def burst(
        self,
        count: int,
        job_type: str,
        scheduled_at: datetime | None,
        job: Callable[[], jobq.Job] = Noop,
    ) -> None:
        """`count` jobs made by `job` (Noop), of one type, in one transaction, as a producer
        writes a burst: enqueue_many, or in code from before it existed (measured with
        --jobq-at) one enqueue() and copies of its row, as preload() makes them."""
        jobs = [job() for _ in range(count)]
        if hasattr(self.queue, "enqueue_many"):
            self.queue.enqueue_many(jobs, type=job_type, scheduled_at=scheduled_at)
            return
        with self.queue.backend.transaction():
            first = self.queue.enqueue(jobs[0], type=job_type, scheduled_at=scheduled_at)
            self.copy(first, count)

    def copy(self, first: int, count: int) -> None:
        """Grow the rows from id `first` on to `count` in doubling INSERT … SELECTs: fast on
        all three databases, and the rows are byte for byte what enqueue() wrote."""
        have = 1
        while have < count:
            more = min(have, count - have)
            self.execute(
                f"INSERT INTO jobq_jobs ({COLUMNS}) SELECT {COLUMNS} FROM jobq_jobs "
                f"WHERE id >= {int(first)} ORDER BY id LIMIT {int(more)}"
            )
            have += more

    def settle(self) -> None:
        """Start every drain from the same state: fresh statistics, and (PostgreSQL) no
        checkpoint debt from the preload landing in the middle of the measurement."""
        if self.kind == "postgresql":
            self.execute("VACUUM ANALYZE jobq_jobs")
            self.execute("CHECKPOINT")
        elif self.kind == "mysql":
            self.rows("ANALYZE TABLE jobq_jobs")
        else:
            self.execute("ANALYZE")
            self.rows("PRAGMA wal_checkpoint(TRUNCATE)")

    def unfinished(self) -> int:
        # One cheap count; the partial indexes make pending/in_progress lookups small.
        return int(
            self.scalar("SELECT count(*) FROM jobq_jobs WHERE status IN ('pending', 'in_progress')")
        )

    def completion(self, first: int | None = None) -> tuple[int, int, float, dict[str, int]]:
        """(completed jobs, those after the first completion time, first-to-last completion
        span in s, {other status: count}); of the `first` earliest completions only, if
        given: a drain stopped once they were done (scale.py) completes the jobs its workers
        had claimed ahead during the stop, which would put the stop in the rate."""
        limit = "" if first is None else f" ORDER BY finished_at LIMIT {int(first)}"
        rows = COMPLETED.format(limit=limit)
        count, after, span = self.rows(COMPLETION.format(rows=rows, span=SPAN[self.kind]))[0]
        others = {
            str(status): int(n)
            for status, n in self.rows(
                "SELECT status, count(*) FROM jobq_jobs WHERE status <> 'completed' GROUP BY status"
            )
        }
        return int(count), int(after or 0), float(span or 0.0), others


def supervise_cmd(
    dsn: str, workers: int | None, *extra: str, log_level: str = "WARNING"
) -> list[str]:
    """The supervisor's command line; without `workers`, `extra` sizes it (--pool)."""
    sizing = () if workers is None else ("--workers", str(workers))
    return [
        PYTHON, "-m", "jobq.supervisor", "--dsn", dsn, "--app", "bench.harness.app",
        *sizing, "--log-level", log_level, *extra,
    ]  # fmt: skip


def wait_drained(
    remaining: Callable[[], int],
    total: int,
    gone: Callable[[], str],
    meter: Meter | None = None,
    poll: float = 0.1,
) -> tuple[float, str, int]:
    """Poll `remaining()` until it is 0, for at most drain_timeout(total). Returns (seconds
    waited, problem, jobs left when the first progress was seen: the jobs drained within the
    metered window). `gone()` names a reason to stop waiting (the workers exited), or returns
    "" to go on."""
    timeout = drain_timeout(total)
    start = time.monotonic()
    deadline = start + timeout
    window_jobs = total
    begun = False
    while True:
        left = remaining()
        if not begun and left < total:
            begun = True
            window_jobs = left
            if meter is not None:
                meter.begin()
        elif meter is not None and begun:
            meter.sample()
        if left == 0:
            if meter is not None:
                meter.end()
            return time.monotonic() - start, "", window_jobs
        if problem := gone():
            return time.monotonic() - start, problem, window_jobs
        if time.monotonic() > deadline:
            return time.monotonic() - start, f"not drained after {timeout:.0f} s", window_jobs
        time.sleep(poll)


def exited(bench: Bench, proc: Any) -> Callable[[], str]:
    def check() -> str:
        if proc.poll() is None:
            return ""
        return f"exited early with {proc.returncode} (see {bench.procs.log_of(proc)})"

    return check
