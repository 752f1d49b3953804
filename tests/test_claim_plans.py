"""The claim reads the ready index, never the whole table, however many finished rows pile up.

The statements checked are the ones the backends send, taken from the backend modules, so the
plans cannot drift from what runs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import jobq
from jobq.backends import mysql, postgresql, sqlite

from . import drivers
from .support import Noop

FINISHED_ROWS = 3000


@pytest.fixture
def crowded(dsn: str, db_kind: str) -> Iterator[jobq.Queue]:
    """A table of many completed jobs and some pending ones, with fresh statistics."""
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        app = drivers.connect(dsn, db_kind, autocommit=False)
        for _ in range(FINISHED_ROWS):
            queue.enqueue(Noop(), connection=app)
        app.commit()
        app.close()
        queue.backend.execute("UPDATE jobq_jobs SET status = 'completed'")
        # Many ready jobs of another type, so that a claim by type has something to skip.
        for _ in range(300):
            queue.enqueue(Noop(), type="other")
        for _ in range(5):
            queue.enqueue(Noop(), type="email")
        analyze = {"postgresql": "ANALYZE jobq_jobs", "mariadb": "ANALYZE TABLE jobq_jobs"}
        queue.backend.execute(analyze.get(db_kind, "ANALYZE"))
        yield queue


def plan(queue: jobq.Queue, sql: str, params: object) -> str:
    return "\n".join(" ".join(map(str, row)) for row in queue.backend.fetchall(sql, params))


@pytest.mark.databases("postgresql")
@pytest.mark.parametrize(
    ("typed", "index"), [(False, "jobq_jobs_ready"), (True, "jobq_jobs_ready_by_type")]
)
def test_postgresql_claims_use_the_ready_index(
    crowded: jobq.Queue, typed: bool, index: str
) -> None:
    params = {"id": 1, "token": "t", "new_token": "u", "lease": 60.0, "types": ["email"]}
    claim = plan(crowded, "EXPLAIN " + postgresql.claim_statement(typed), params)
    fused = plan(crowded, "EXPLAIN " + postgresql.complete_and_claim_statement(typed), params)
    for text in (claim, fused):
        assert f"Index Scan using {index} on jobq_jobs" in text, text
        assert "Seq Scan on jobq_jobs" not in text, text
    # The acknowledgement fused with the claim finds its row by primary key.
    assert "Index Scan using jobq_jobs_pkey on jobq_jobs" in fused, fused


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize(
    ("statement", "index"),
    [(sqlite.CLAIM_ANY, "jobq_jobs_ready"), (sqlite.CLAIM_TYPED, "jobq_jobs_ready")],
)
def test_sqlite_claim_uses_the_ready_index(crowded: jobq.Queue, statement: str, index: str) -> None:
    params = {"token": "t", "lease": 60.0, "types": '["email"]'}
    text = plan(crowded, "EXPLAIN QUERY PLAN " + statement, params)
    assert f"USING INDEX {index}" in text or f"USING COVERING INDEX {index}" in text, text
    assert "SCAN jobq_jobs\n" not in text + "\n", text


@pytest.mark.databases("mariadb")
@pytest.mark.parametrize("types", [0, 1])
def test_mariadb_claim_uses_a_ready_index(crowded: jobq.Queue, types: int) -> None:
    params = {"lease": 60_000_000, "type0": "email"}
    rows = crowded.backend.fetchall("EXPLAIN " + mysql.claim_select(types), params)
    (row,) = rows
    # Columns: id, select_type, table, type, possible_keys, key, key_len, ref, rows, Extra.
    assert str(row[5]).startswith("jobq_jobs_ready"), row
    assert row[3] != "ALL", row
