"""What one job's life leaves behind on PostgreSQL: how many of its updates are HOT (no new
index entry), and how many index entries it adds, each of which vacuum must later clean.

Not a section of the run: `python -m bench.measures.index_entries DSN [JOBS]` on a database of
its own (it installs jobq's schema and empties the jobs table), once with nothing held and
once behind a held snapshot. JOBS no-op jobs are enqueued in one COPY, then claimed
and completed in batches as a worker does (claim_many, complete_many_and_claim), with
autovacuum off on the jobs table, so that every entry made is still in the indexes. The
entries are counted in the leaf pages (pageinspect), dead or alive; the updates from
pg_stat_user_tables.
"""

from __future__ import annotations

import sys
from typing import Any

import psycopg

import jobq
from bench.harness.app import Noop

BATCH = 100

# Every heap pointer in every leaf page of an index, dead or alive: an item's own, or each of
# a posting list's (deduplication folds entries of one key into one item), the high key aside.
LEAF_ITEMS = """
    SELECT coalesce(sum(coalesce(cardinality(i.tids), 1)), 0)
    FROM generate_series(1, pg_relation_size(%(index)s::regclass) / 8192 - 1) AS b(n),
         LATERAL bt_page_stats(%(index)s::text, b.n::bigint) AS s,
         LATERAL bt_page_items(%(index)s::text, b.n::bigint) AS i
    WHERE s.type = 'l' AND NOT (s.btpo_next <> 0 AND i.itemoffset = 1)
"""


def entries(connection: psycopg.Connection[Any]) -> dict[str, int]:
    names = connection.execute(
        "SELECT indexrelname FROM pg_stat_user_indexes WHERE relname = 'jobq_jobs' ORDER BY 1"
    ).fetchall()
    found = {}
    for (name,) in names:
        row = connection.execute(LEAF_ITEMS, {"index": name}).fetchone()
        found[name] = int(row[0]) if row else 0
    return found


def updates(connection: psycopg.Connection[Any]) -> tuple[int, int]:
    connection.execute("SELECT pg_stat_clear_snapshot()")
    row = connection.execute(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'jobq_jobs'"
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def main(dsn: str, jobs: int, held: bool) -> None:
    """With `held`, a REPEATABLE READ snapshot is held meanwhile on another session, so that
    no entry can be removed before it is counted (PostgreSQL's bottom-up deletion and the
    marking of dead entries as walks pass them both clean up as the jobs run otherwise)."""
    with (
        jobq.Queue.connect(dsn) as queue,
        psycopg.connect(dsn, autocommit=True) as stats,
        psycopg.connect(dsn, autocommit=True) as holder,
    ):
        queue.install()
        queue.backend.execute("TRUNCATE jobq_jobs")
        if held:
            holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            holder.execute("SELECT 1")
        stats.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
        stats.execute("ALTER TABLE jobq_jobs SET (autovacuum_enabled = off)")
        queue.enqueue_many([Noop() for _ in range(jobs)])
        flush = "SELECT pg_stat_force_next_flush()"
        queue.backend.execute(flush)
        made, upd = entries(stats), updates(stats)
        claims = queue.claim_many(BATCH)
        while claims:
            _, claims = queue.complete_many_and_claim(claims, BATCH)
        queue.backend.execute(flush)
        ran, upd_after = entries(stats), updates(stats)
    total, hot = upd_after[0] - upd[0], upd_after[1] - upd[1]
    behind = "behind a held snapshot" if held else "nothing held"
    print(f"{jobs} jobs, {behind}: {total / jobs:.2f} updates a job, {hot / jobs:.2f} HOT")
    print("index entries a job, at enqueue / after it ran:")
    for name in ran:
        print(f"  {name}: {made[name] / jobs:.2f} / {ran[name] / jobs:.2f}")
    print(f"  all: {sum(made.values()) / jobs:.2f} / {sum(ran.values()) / jobs:.2f}")


if __name__ == "__main__":
    dsn, *sized = sys.argv[1:]
    for held in (False, True):
        main(dsn, int(sized[0]) if sized else 10_000, held)
