"""`jobq migrate` upgrades a database made by an earlier release without losing or changing
a job, in any state; the upgraded schema then works, and installing again changes nothing.

The earlier schema is made from the migrations themselves (all but the newest, or only the
first), and its rows are written with plain SQL in that schema's columns, as the release
that made it would have."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import jobq
from jobq.backends.base import Backend
from jobq.cli.commands import main
from tests.support.jobs import Noop

# The columns of the first schema, which every later one keeps as they were.
COLUMNS = (
    "id",
    "type",
    "class_name",
    "payload",
    "status",
    "attempts",
    "max_attempts",
    "backoff",
    "max_backoff",
    "jitter",
    "token",
    "lease_until",
    "scheduled_at",
    "deadline",
    "last_error",
    "created_at",
    "updated_at",
    "finished_at",
)
NOW = datetime.now(UTC).replace(microsecond=0)
HOUR = timedelta(hours=1)
# One row per state a job can be in under the earlier schema (ids 1 to 7; 7 is deleted).
ROWS: list[dict[str, Any]] = [
    {"status": "pending", "attempts": 0},
    {"status": "pending", "attempts": 1, "deadline": NOW + HOUR, "last_error": "boom"},
    {"status": "in_progress", "attempts": 1, "token": "t" * 32, "lease_until": NOW + HOUR},
    {"status": "completed", "attempts": 1, "finished_at": NOW},
    {
        "status": "failed",
        "attempts": 3,
        "last_error": "Traceback…\nValueError: ü",
        "finished_at": NOW,
    },
    {"status": "expired", "attempts": 0, "deadline": NOW - HOUR, "finished_at": NOW},
    {"status": "completed", "attempts": 1, "finished_at": NOW},
]


def install_up_to(backend: Backend, version: int) -> None:
    with backend.install_lock():
        backend.execute(backend.sql_create_versions)
        for number, statements in enumerate(backend.migrations[:version], start=1):
            for statement in statements:
                backend.execute(statement)
            backend.record_version(number)


def insert(backend: Backend, number: int, row: dict[str, Any]) -> None:
    values: dict[str, Any] = {
        "type": f"kind{number % 3}",
        "class_name": "tests.support.Noop",
        "payload": "{}",
        "max_attempts": 3,
        "backoff": 1.5,
        "max_backoff": 60.0,
        "jitter": True,
        "token": None,
        "lease_until": None,
        "scheduled_at": NOW - HOUR,
        "deadline": None,
        "last_error": None,
        "created_at": NOW - 2 * HOUR,
        "updated_at": NOW - HOUR,
        "finished_at": None,
        **row,
    }
    params = {
        name: backend.moment(value) if isinstance(value, datetime) else value
        for name, value in values.items()
    }
    # Ids are the database's own, as they were: 1 to 7 in a fresh table.
    written = COLUMNS[1:]
    marks = ", ".join(backend.placeholder.format(name) for name in written)
    backend.execute(f"INSERT INTO jobq_jobs ({', '.join(written)}) VALUES ({marks})", params)


def table(backend: Backend) -> list[tuple[Any, ...]]:
    return [
        tuple(row)
        for row in backend.fetchall(f"SELECT {', '.join(COLUMNS)} FROM jobq_jobs ORDER BY id")
    ]


@pytest.mark.parametrize("earlier", ["previous", "first"])
def test_migrate_upgrades_every_row_unchanged(dsn: str, earlier: str) -> None:
    with jobq.Queue.connect(dsn) as queue:
        backend = queue.backend
        latest = len(backend.migrations)
        version = latest - 1 if earlier == "previous" else 1
        install_up_to(backend, version)
        for number, row in enumerate(ROWS, start=1):
            insert(backend, number, row)
        backend.execute("DELETE FROM jobq_jobs WHERE id = 7")
        before = table(backend)

        assert main(["migrate", "--dsn", dsn]) == 0

        assert backend.schema_version() == latest
        assert table(backend) == before
        records = queue.jobs(limit=10)
        assert [record.id for record in records] == [6, 5, 4, 3, 2, 1]
        assert {record.priority for record in records} == {0}
        assert all(record.cancel_requested_at is None for record in records)
        # The attempt claimed before the upgrade names no worker; it is still in progress.
        assert [record.worker for record in records if record.id == 3] == [None]
        assert queue.paused() == set()
        # No row enqueued before the upgrade carries a trace context: its attempts start traces.
        contexts = backend.fetchall("SELECT traceparent, tracestate FROM jobq_jobs")
        assert set(map(tuple, contexts)) == {(None, None)}
        # No row has a result, progress, checkpoint or history yet: the completed ones
        # finished before jobq kept any.
        assert all(record.result is None and record.progress is None for record in records)
        assert all(record.checkpoint is None and record.history == () for record in records)
        assert all(record.started_at is None for record in records)
        # Installing again, as every start of an application may, changes nothing.
        assert queue.install() == (latest, latest)
        assert table(backend) == before
        # The upgraded table works: the ready job is claimed, a new one gets a new id.
        claim = queue.claim()
        assert claim is not None
        assert claim.id == 1
        assert (claim.traceparent, claim.tracestate) == (None, None)
        claimed = queue.get(1)
        assert claimed is not None
        assert claimed.worker is not None
        assert claimed.started_at is not None
        assert queue.enqueue(Noop(), priority=5) > 7
        # The attempt claimed before the upgrade completes: its history starts with it, and
        # knows no start for it.
        assert backend.complete(3, "t" * 32, '"answer"')
        completed = queue.wait(3, timeout=0)
        assert completed.result == "answer"
        assert [(entry.attempt, entry.started_at) for entry in completed.history] == [(1, None)]
