"""Asking a database its schema version writes nothing to it."""

from __future__ import annotations

from pathlib import Path

import pytest

import jobq
from jobq.backends.sqlite import SqliteBackend
from jobq.errors import NoSchema


def test_asking_the_schema_version_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite3"
    with jobq.Queue.connect(f"sqlite:///{path}") as queue:
        assert queue.backend.schema_version() == 0
        tables = queue.backend.fetchall("SELECT name FROM sqlite_master")
    assert tables == []
    with pytest.raises(NoSchema):
        SqliteBackend.connect(f"sqlite:///{tmp_path / 'missing.sqlite3'}", create=False)
    assert not (tmp_path / "missing.sqlite3").exists()
