"""The status page's queries read indexes, never the whole table, whatever the database's
statistics say: the oldest ready job per type is a few LIMIT 1 probes of the typed ready
index, a filtered jobs list walks the jobs index (status, type, id) in id order, and the
overview's counts read their partial indexes or a range of finished_at.

The table holds many finished jobs, ready jobs of several types and priorities, and a few of
a filtered type, with statistics current, stale (taken before the rows were written, with
automatic statistics off) or absent. The statements are the backends' own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import jobq
from jobq.backends.postgresql import controls as postgresql_controls
from jobq.backends.postgresql import limits as postgresql_limits
from jobq.backends.postgresql import schema as postgresql_schema
from jobq.records import Status
from tests.support.jobs import Noop
from tests.support.plans import (
    STATISTICS,
    postgresql_plan,
    statistics_left,
    table_scans,
)

# The indexes the status page's probes walk: by status, type and id; the typed ready one;
# and the primary key, to read a page's records by id.
STATUS_INDEXES = ("jobq_jobs_by_status", "jobq_jobs_ready_by_type", "jobq_jobs_pkey")
INDEX_READS = (
    "Index Scan",
    "Index Only Scan",
    "Index Scan Backward",
    "Bitmap Index Scan",
    "Bitmap Heap Scan",
)
FINISHED_ROWS = 20_000
READY_ROWS = 3000
PRIORITIES = (-5, 0, 7)
PAGE = 51
# The jobs list's filters: one status and type, every status of a type, every type of a
# status; with and without a page boundary.
FILTERS = [
    ([(Status.FAILED, "email")], None),
    ([(Status.IN_PROGRESS, "email")], None),
    ([(each, "email") for each in Status], 10**6),
    ([(Status.PENDING, name) for name in ("email", "other", "noop")], None),
]


@pytest.fixture(params=STATISTICS)
def crowded(request: pytest.FixtureRequest, dsn: str, db_kind: str) -> Iterator[jobq.Queue]:
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        backend = queue.backend
        with statistics_left(queue, db_kind, request.param):
            queue.enqueue_many([Noop() for _ in range(FINISHED_ROWS)])
            # Finished a day ago: the overview's last hour holds none of them.
            yesterday = backend.moment(datetime.now(UTC) - timedelta(days=1))
            mark = backend.placeholder.format("yesterday")
            backend.execute(
                f"UPDATE jobq_jobs SET status = 'completed', finished_at = {mark} "
                "WHERE type = 'noop'",
                {"yesterday": yesterday},
            )
            earlier = datetime.now(UTC) - timedelta(hours=1)
            for priority in PRIORITIES:
                others = [Noop() for _ in range(READY_ROWS // len(PRIORITIES))]
                queue.enqueue_many(others, type="other", scheduled_at=earlier, priority=priority)
        yield queue


def jobs_statements(queue: jobq.Queue) -> Iterator[tuple[str, dict[str, Any]]]:
    """A filtered list's statements: the probes, the step to the next type, the records."""
    backend = queue.backend
    for pairs, before in FILTERS:
        yield backend.newest(pairs, PAGE, before)
    yield backend.next_type_of(), {"status": "pending", "after": "email"}
    yield backend.by_ids(list(range(1, PAGE + 1)))


def overview_statements(queue: jobq.Queue) -> Iterator[tuple[str, dict[str, Any]]]:
    backend = queue.backend
    yield backend.sql_recent_counts, {"minutes": 60}
    yield backend.sql_completions, {"minutes": 60}
    yield backend.sql_get, {"id": 7}
    yield backend.sql_jobs, {"before": None, "limit": PAGE}


def oldest_ready_probes(queue: jobq.Queue) -> Iterator[tuple[str, dict[str, Any]]]:
    backend = queue.backend
    yield backend.sql_next_pending_type, {"after": "email"}
    yield backend.sql_next_pending_priority, {"type": "other", "below": 7}
    yield backend.sql_ready_age, {"type": "other", "priority": 0}


@pytest.mark.databases("postgresql")
def test_postgresql_status_page_reads_indexes(
    crowded: jobq.Queue, request: pytest.FixtureRequest
) -> None:
    probes: list[tuple[str, dict[str, Any]]] = [(postgresql_limits.OLDEST_UNBLOCKED, {})]
    probes += list(jobs_statements(crowded))[-2:]
    # The list's probes as jobq_newest plans them.
    for pairs, before in FILTERS:
        for status, name in pairs:
            if status is Status.IN_PROGRESS:
                continue  # jobq_newest hands these to jobq_newest_running: below
            condition = "" if before is None else " AND id < %(before)s"
            sql = postgresql_controls.NEWEST_QUERY.format(before=condition)
            for variable, parameter in (("job_status", "status"), ("job_type", "type")):
                sql = sql.replace(variable, f"%({parameter})s")
            sql = sql.replace("how_many", str(PAGE))
            params = {"status": str(status), "type": name, "before": before}
            probes.append((sql, params))
    # The jobs in progress, which the jobs index leaves out, as jobq_newest_running plans
    # them: from the leases' partial index, sorted (they are few).
    running = postgresql_controls.NEWEST_RUNNING_QUERY.replace("job_type", "%(type)s")
    running = running.replace("before_id", "%(before)s::bigint").replace("how_many", str(PAGE))
    plan = postgresql_plan(crowded, running, {"type": "email", "before": None})
    reads = [(s["Node Type"], s.get("Index Name")) for s, _ in table_scans(plan)]
    assert reads, running
    for read in reads:
        assert read in (("Index Scan", "jobq_jobs_leases"), ("Bitmap Heap Scan", None)), reads
    assert "jobq_jobs_leases" in json.dumps(plan), plan
    for sql, params in probes:
        with crowded.backend.transaction():
            for name, value in postgresql_schema.PROBE_SETTINGS.items():
                crowded.backend.execute(f"SET LOCAL {name} = {value}")
            plan = postgresql_plan(crowded, sql, params)
        found = [(s["Node Type"], s.get("Index Name"), by) for s, by in table_scans(plan)]
        assert found, sql
        # Each probe is an ordered walk of an index that stops at its LIMIT, never rows
        # sorted; the records of a page are read by their ids.
        for node_type, index, sorted_ in found:
            assert node_type in INDEX_READS, (sql, found)
            assert index in STATUS_INDEXES or node_type == "Bitmap Heap Scan", (sql, found)
            assert not sorted_ or index == "jobq_jobs_pkey", (sql, found)
    # The counts read every unfinished job whatever the plan. Statistics that call every
    # row pending make a sequential scan the cheaper way to read them all, and right by them.
    if request.node.callspec.params["crowded"] == "stale":
        return
    for sql, params in overview_statements(crowded):
        plan = postgresql_plan(crowded, sql, params)
        kinds = [scan["Node Type"] for scan, _ in table_scans(plan)]
        assert "Seq Scan" not in kinds, (sql, kinds)


def sqlite_reads(queue: jobq.Queue, sql: str, params: dict[str, Any]) -> tuple[list[Any], str]:
    rows = queue.backend.fetchall("EXPLAIN QUERY PLAN " + sql, params)
    reads = [row for row in rows if row[3].split(" ")[:2] in (["SEARCH", "jobq_jobs"],)]
    scans = [row for row in rows if row[3].startswith("SCAN jobq_jobs")]
    assert not scans, rows
    return reads, "\n".join(map(str, rows))


@pytest.mark.databases("sqlite")
def test_sqlite_status_page_reads_indexes(crowded: jobq.Queue) -> None:
    probes = [*oldest_ready_probes(crowded), *jobs_statements(crowded)]
    for sql, params in probes:
        rows = crowded.backend.fetchall("EXPLAIN QUERY PLAN " + sql, params)
        reads, text = sqlite_reads(crowded, sql, params)
        assert reads, text
        sorted_below = {row[1] for row in rows if "TEMP B-TREE" in row[3]}
        for _, parent, _, detail in reads:
            assert any(index in detail for index in STATUS_INDEXES[:2]) or (
                "INTEGER PRIMARY KEY" in detail
            ), text
            assert parent not in sorted_below, text
    for sql, params in overview_statements(crowded):
        sqlite_reads(crowded, sql, params)


@pytest.mark.databases("mariadb")
def test_mariadb_status_page_reads_indexes(crowded: jobq.Queue) -> None:
    probes = [*oldest_ready_probes(crowded), *jobs_statements(crowded)]
    for sql, params in probes:
        rows = crowded.backend.fetchall("EXPLAIN " + sql, params)
        # Columns: id, select_type, table, type, possible_keys, key, key_len, ref, rows, Extra.
        reads = [row for row in rows if row[2] == "jobq_jobs"]
        assert reads, rows
        for row in reads:
            assert row[5] in (*STATUS_INDEXES[:2], "PRIMARY"), rows
            assert row[3] in ("range", "ref", "const", "eq_ref"), rows
            assert "filesort" not in str(row[9]) or row[5] == "PRIMARY", rows
    for sql, params in overview_statements(crowded):
        rows = crowded.backend.fetchall("EXPLAIN " + sql, params)
        assert all(row[3] != "ALL" for row in rows if row[2] == "jobq_jobs"), (sql, rows)
