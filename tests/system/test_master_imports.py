"""The master imports, before each of its forks, nothing of what it must not
(jobq/supervisor/imports.py), nor the application: read from a real master, at every fork
it makes, by a hook of Python's own (tests/support/apps/imports_at_fork.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.observe import helpers_of
from jobq.supervisor.imports import NOT_IN_MASTER, forbidden_in
from tests.support.supervising import supervisor
from tests.support.waiting import wait_for

APP = "supervised_app"
WORKERS = 2


def forks_seen(path: Path) -> list[set[str]]:
    """The master's modules at each fork so far, in order."""
    if not path.exists():
        return []
    return [set(json.loads(line)) for line in path.read_text().splitlines() if line]


@pytest.mark.databases("postgresql")
def test_the_master_forks_without_the_modules_it_must_not_import(dsn: str, tmp_path: Path) -> None:
    """Every fork is seen: the application's check, the three helpers and the workers."""
    imports = tmp_path / "imports"
    with supervisor(
        dsn, "--workers", str(WORKERS), "--migrate",
        entry="imports_at_fork", env={"IMPORTS_AT_FORK": str(imports)},
    ) as running:  # fmt: skip
        wait_for("the workers ready", lambda: running.log.count("ready") >= WORKERS, 60)
        wait_for("three helpers", lambda: len(helpers_of(running.pid)) == 3, 30)
        forks = forks_seen(imports)
    assert len(forks) >= 1 + 3 + WORKERS, running.log
    for number, modules in enumerate(forks, 1):
        found = forbidden_in(modules, also=(APP,))
        assert not found, f"fork {number}: the master had imported {found}"
    assert "psycopg" in forks[-1], "what every child needs is imported once, in the master"


def test_a_forbidden_name_covers_its_submodules_and_no_other_module() -> None:
    assert all(NOT_IN_MASTER.values()), "each forbidden module says why"
    assert forbidden_in({"jobq.web.views", "jobq.webhooks", "jobq.queue"}) == ["jobq.web.views"]
