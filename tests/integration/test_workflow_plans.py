"""100,000 waiting dependents cost a claim nothing: they are outside every ready index, so a
claim's probe reads the one ready job it takes and no waiting row, though they are all of a
higher priority and scheduled earlier."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

import jobq
from jobq.backends.mysql import claims as mysql_claims
from jobq.backends.postgresql import limits as postgresql_limits
from jobq.backends.postgresql import schema as postgresql_schema
from jobq.backends.sqlite import claims as sqlite_claims
from tests.support.jobs import Noop
from tests.support.plans import logged_plans, nodes

WAITING = 100_000
# A row source of WAITING rows, in each database's words: copies of one job are made by the
# database itself, an enqueue per row would take most of a minute on a loaded machine.
SERIES = {
    "postgresql": f"generate_series(1, {WAITING})",
    "sqlite": f"(WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s "
    f"WHERE n < {WAITING}) SELECT n FROM s)",
    "mariadb": f"seq_1_to_{WAITING}",
}
COPIED = "type, class_name, payload, max_attempts, backoff, max_backoff, jitter, created_at"


@pytest.fixture
def behind_waiting(dsn: str, db_kind: str) -> Iterator[tuple[jobq.Queue, int]]:
    """A queue of WAITING waiting jobs at the highest priority, scheduled earliest, then
    one ready job."""
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        ready = queue.enqueue(Noop(), delay=0)
        queue.backend.execute(
            f"INSERT INTO jobq_jobs ({COPIED}, updated_at, scheduled_at, priority, status, "
            f"waiting_for) SELECT {COPIED}, created_at, created_at, 1000, 'waiting', 1 "
            f"FROM jobq_jobs AS j, {SERIES[db_kind]} AS series WHERE j.id = {int(ready)}"
        )
        yield queue, ready


@pytest.mark.databases("postgresql")
def test_postgresql_probe_reads_no_waiting_row(behind_waiting: tuple[jobq.Queue, int]) -> None:
    queue, ready = behind_waiting
    queue.backend.execute("ANALYZE jobq_jobs")
    with queue.backend.transaction():
        for name, value in postgresql_schema.PROBE_SETTINGS.items():
            queue.backend.execute(f"SET LOCAL {name} = {value}")
        probe = postgresql_limits.UNBLOCKED_PROBE.format(which=postgresql_schema.UNPAUSED)
        (row,) = queue.backend.fetchall("EXPLAIN (ANALYZE, FORMAT JSON) " + probe)
    plan = (json.loads(row[0]) if isinstance(row[0], str) else row[0])[0]["Plan"]
    scans = [node for node in nodes(plan) if node.get("Relation Name") == "jobq_jobs"]
    assert [(s["Index Name"], s["Actual Rows"]) for s in scans] == [("jobq_jobs_ready_any", 1)], (
        plan
    )
    assert all(s.get("Rows Removed by Filter", 0) == 0 for s in scans), plan
    claim = queue.claim()
    assert claim is not None
    assert claim.id == ready


@pytest.mark.databases("sqlite")
def test_sqlite_claim_walks_the_ready_index(behind_waiting: tuple[jobq.Queue, int]) -> None:
    queue, ready = behind_waiting
    rows = queue.backend.fetchall(
        "EXPLAIN QUERY PLAN " + sqlite_claims.claim_statement(0),
        {"token": "t", "lease": 60.0, "host": "h", "pid": 1, "worker": "w"},
    )
    probes = [row[3] for row in rows if "jobq_jobs USING INDEX" in row[3]]
    assert probes == ["SCAN jobq_jobs USING INDEX jobq_jobs_ready"], rows
    claim = queue.claim()
    assert claim is not None
    assert claim.id == ready


@pytest.mark.databases("mariadb")
def test_mariadb_probe_reads_no_waiting_row(behind_waiting: tuple[jobq.Queue, int]) -> None:
    queue, ready = behind_waiting
    queue.backend.execute("ANALYZE TABLE jobq_jobs")
    rows = queue.backend.fetchall("ANALYZE " + mysql_claims.claim_select(0), {"lease": 60_000_000})
    # Columns: id, select_type, table, type, possible_keys, key, key_len, ref, rows, r_rows...
    probes = [row for row in rows if row[2] == "jobq_jobs"]
    assert [(row[5], float(row[9])) for row in probes] == [("jobq_jobs_ready", 1.0)], rows
    claim = queue.claim()
    assert claim is not None
    assert claim.id == ready


@pytest.mark.databases("postgresql")
def test_postgresql_the_ending_of_a_job_nothing_depends_on_skips_the_workflow_statements(
    queue: jobq.Queue,
) -> None:
    """Nearly every job has no dependent: its ending does not run the trigger at all (its
    statements were most of a batched acknowledgement's server time, and its call with its
    check about 4 us a job). A parent's ending still runs them all."""
    parent, lone = queue.enqueue(Noop()), queue.enqueue(Noop())
    queue.enqueue(Noop(), after=[parent])
    ending = "UPDATE jobq_jobs SET status = 'completed' WHERE id = %(id)s"

    def reads_of_dependencies(job_id: int) -> int:
        documents = logged_plans(queue, ending, {"id": job_id})
        return sum("jobq_dependencies" in document["Query Text"] for document in documents)

    assert reads_of_dependencies(lone) == 0
    assert reads_of_dependencies(parent) > 1
