"""AsyncQueue without its database's async driver: the error names the extra to install."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

import jobq


def test_a_missing_async_driver_names_its_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A None entry makes `import aiosqlite` fail as if it were not installed.
    monkeypatch.setitem(sys.modules, "aiosqlite", None)
    monkeypatch.delitem(sys.modules, "jobq.backends.sqlite.asynchronous", raising=False)
    with pytest.raises(jobq.ConfigurationError, match=r"aiosqlite .*'jobq\[async-sqlite\]'"):
        asyncio.run(jobq.AsyncQueue.connect(f"sqlite:///{tmp_path}/jobq.sqlite3"))
