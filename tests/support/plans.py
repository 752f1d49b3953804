"""Reading query plans in tests: PostgreSQL's as JSON, and putting a table's statistics in
the state a test names (current, stale, or never taken)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

import jobq
from tests.support.jobs import Noop

# current: taken after the rows were written; stale: taken before most of them, with
# automatic statistics off; absent: never taken.
STATISTICS = ("current", "stale", "absent")
# Enough rows of one type, one priority, for SQLite to consider skipping over those columns
# (it does from 18 rows per value), as it does after an ANALYZE of a burst of one type.
STALE_ROWS = 1000
ANALYZE = {"postgresql": "ANALYZE jobq_jobs", "mariadb": "ANALYZE TABLE jobq_jobs"}
NO_AUTOMATIC_STATISTICS = {
    "postgresql": "ALTER TABLE jobq_jobs SET (autovacuum_enabled = off)",
    "mariadb": "ALTER TABLE jobq_jobs STATS_AUTO_RECALC = 0",
}


def postgresql_plan(
    queue: jobq.Queue, sql: str, params: dict[str, Any], analyze: bool = False
) -> dict[str, Any]:
    """The plan of `sql`; with `analyze`, the statement runs, and its nodes count their rows."""
    options = "ANALYZE, FORMAT JSON" if analyze else "FORMAT JSON"
    (row,) = queue.backend.fetchall(f"EXPLAIN ({options}) " + sql, params)
    document = row[0] if isinstance(row[0], list) else json.loads(row[0])
    plan: dict[str, Any] = document[0]["Plan"]
    return plan


def logged_plans(
    queue: jobq.Queue, sql: str, params: dict[str, Any], *settings: str
) -> list[dict[str, Any]]:
    """Run `sql` and roll it back, with each statement's plan, nested ones included (those
    of triggers), sent back to this session by auto_explain; `settings` are SET LOCALs
    applied first. The plans, as JSON documents."""
    connection = queue.backend.connection
    plans: list[str] = []

    def keep(notice: psycopg.errors.Diagnostic) -> None:
        plans.append(notice.message_primary or "")

    connection.add_notice_handler(keep)
    try:
        with connection.transaction(force_rollback=True):
            for setting in (
                "LOAD 'auto_explain'",
                "SET LOCAL auto_explain.log_min_duration = 0",
                "SET LOCAL auto_explain.log_nested_statements = on",
                "SET LOCAL auto_explain.log_format = json",
                "SET LOCAL client_min_messages = log",
                *settings,
            ):
                queue.backend.execute(setting)
            queue.backend.execute(sql, params)
    finally:
        connection.remove_notice_handler(keep)
    return [json.loads(plan.split("plan:", 1)[1]) for plan in plans if "plan:" in plan]


def nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from nodes(child)


def table_scans(
    node: dict[str, Any], sorting: bool = False
) -> Iterator[tuple[dict[str, Any], bool]]:
    """Every scan of jobq_jobs in a plan, and whether a sort reads its rows (as opposed to
    the single rows a LIMIT 1 probe returns)."""
    if node.get("Relation Name") == "jobq_jobs" and node["Node Type"] != "ModifyTable":
        yield node, sorting
    sorting = (sorting or node["Node Type"] in ("Sort", "Incremental Sort")) and (
        node["Node Type"] != "Limit"
    )
    for child in node.get("Plans", []):
        yield from table_scans(child, sorting)


@contextmanager
def statistics_left(queue: jobq.Queue, db_kind: str, statistics: str) -> Iterator[None]:
    """Statistics on jobq_jobs as `statistics` names them once the rows written inside are
    in: taken after them (current), or before them, while STALE_ROWS pending `email` jobs
    were all there was (stale: the planner believes every row is one), or never (absent)."""
    backend = queue.backend
    if db_kind in NO_AUTOMATIC_STATISTICS:
        backend.execute(NO_AUTOMATIC_STATISTICS[db_kind])
    analyze = ANALYZE.get(db_kind, "ANALYZE")
    queue.enqueue_many([Noop() for _ in range(STALE_ROWS)], type="email")
    if statistics == "stale":
        backend.execute(analyze)
    yield
    if statistics == "current":
        backend.execute(analyze)
