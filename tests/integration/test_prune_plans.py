"""The job cleaner's statements read the pruning index (jobq_jobs_pruning, on status and
finished_at), never every finished row: a prune batch walks one status's range of it from the
oldest end and stops at the retention's cutoff or at its LIMIT, unsorted (PostgreSQL with no
statistics gathers that range by a bitmap and sorts it), what other jobs still need probed by
key; the oldest finished job's age is the first entry of each status's range. So the cleaner
may run with every maintenance run (retention.py). On main, the planners read the status
index or the whole table instead.

The table holds many completed and failed jobs finished within the retention and a few older
ones, with statistics current, stale (taken before the rows were written, with automatic
statistics off) or absent. The statements are the backends' own.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import jobq
from jobq.queue.maintenance import PRUNE_BATCH
from jobq.records import Status
from tests.support.jobs import Noop
from tests.support.plans import STATISTICS, nodes, postgresql_plan, statistics_left, table_scans

RECENT_ROWS = 20_000
OLD_ROWS = 200
DAY = 86_400.0
PRUNING_INDEX = "jobq_jobs_pruning"


def finish(queue: jobq.Queue, count: int, ago: timedelta, status: Status) -> None:
    queue.enqueue_many([Noop() for _ in range(count)], type="done")
    backend = queue.backend
    at, ended = backend.placeholder.format("at"), backend.placeholder.format("status")
    backend.execute(
        f"UPDATE jobq_jobs SET status = {ended}, finished_at = {at} "
        "WHERE type = 'done' AND finished_at IS NULL",
        {"at": backend.moment(datetime.now(UTC) - ago), "status": str(status)},
    )


@pytest.fixture(params=STATISTICS)
def finished(request: pytest.FixtureRequest, dsn: str, db_kind: str) -> Iterator[jobq.Queue]:
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        with statistics_left(queue, db_kind, request.param):
            finish(queue, OLD_ROWS, timedelta(days=2), Status.COMPLETED)
            finish(queue, RECENT_ROWS // 2, timedelta(hours=1), Status.COMPLETED)
            finish(queue, RECENT_ROWS // 2, timedelta(hours=2), Status.FAILED)
        yield queue


def prune_statements(queue: jobq.Queue) -> Iterator[tuple[str, dict[str, Any]]]:
    """A batch of each status's prune, as maintenance.prune has Backend.prune run it; the
    oldest finished job's age."""
    backend = queue.backend
    for status in (Status.COMPLETED, Status.FAILED):
        marks, params = backend.marks("status", [str(status)])
        params |= {"older_than": backend.seconds(DAY), "batch": PRUNE_BATCH}
        yield backend.sql_prune.format(statuses=marks), params
    yield backend.sql_oldest_finished, {}


def reads_the_range(scan: dict[str, Any], sorted_: bool) -> bool:
    """Whether a scan reads jobq_jobs by the pruning index's range: walked in order, or
    (PostgreSQL with no statistics, which expects a few rows) the range below the cutoff
    gathered by a bitmap and sorted; or a row by its id."""
    if scan.get("Index Name") == "jobq_jobs_pkey":
        return True
    if scan["Node Type"] in ("Index Scan", "Index Only Scan"):
        return scan["Index Name"] == PRUNING_INDEX and not sorted_
    bitmaps = [
        child.get("Index Name")
        for child in scan.get("Plans", [])
        if child["Node Type"] == "Bitmap Index Scan" and child["Parent Relationship"] == "Outer"
    ]
    return scan["Node Type"] == "Bitmap Heap Scan" and bitmaps == [PRUNING_INDEX]


@pytest.mark.databases("postgresql")
def test_postgresql_pruning_walks_the_pruning_index(finished: jobq.Queue) -> None:
    for sql, params in prune_statements(finished):
        plan = postgresql_plan(finished, sql, params)
        scans = list(table_scans(plan))
        shown = [(s["Node Type"], s.get("Index Name"), by) for s, by in scans]
        assert any(s.get("Index Name") == PRUNING_INDEX for s in nodes(plan)), (sql, shown)
        for scan, sorted_ in scans:
            assert reads_the_range(scan, sorted_), (sql, shown)
        # What another job still needs is probed row by row, by key, never read whole.
        whole = [n for n in nodes(plan) if n["Node Type"] == "Seq Scan"]
        assert not [n for n in whole if n["Relation Name"] == "jobq_jobs"], (sql, shown)


@pytest.mark.databases("sqlite")
def test_sqlite_pruning_walks_the_pruning_index(finished: jobq.Queue) -> None:
    for sql, params in prune_statements(finished):
        rows = finished.backend.fetchall("EXPLAIN QUERY PLAN " + sql, params)
        text = "\n".join(map(str, rows))
        reads = [row[3] for row in rows if row[3].split(" ")[1:2] == ["jobq_jobs"]]
        ours = [read for read in reads if "INTEGER PRIMARY KEY" not in read]
        assert ours, text
        for read in ours:
            assert read.startswith("SEARCH jobq_jobs USING "), text
            assert read.split(" (")[0].endswith(f"INDEX {PRUNING_INDEX}"), text
        assert not any("TEMP B-TREE" in row[3] for row in rows), text


@pytest.mark.databases("mariadb")
def test_mariadb_pruning_walks_the_pruning_index(finished: jobq.Queue) -> None:
    for sql, params in prune_statements(finished):
        rows = finished.backend.fetchall("EXPLAIN " + sql, params)
        # Columns: id, select_type, table, type, possible_keys, key, key_len, ref, rows, Extra.
        reads = [row for row in rows if row[2] == "jobq_jobs"]
        assert reads, rows
        for row in reads:
            assert (row[3], row[5]) == ("range", PRUNING_INDEX), (sql, rows)
            assert "filesort" not in str(row[9]), (sql, rows)
