"""`jobq demo lease`, run as a real command on every database. About 25 s a run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

import jobq

REPO_DIR = Path(jobq.__file__).resolve().parent.parent
# Two phases of 9 to 15 s each, plus start-up and shutdown; the demo bounds each phase at 40 s.
DEMO_TIMEOUT = 110.0

EXPECTED = [
    # a) no renewal
    "ok: two attempts started, 1 and 2",
    "ok: attempt 2 went to w",
    "ok: attempt 2 started 6.",
    "ok: both workers ran the job at the same time for",
    "ok: no ack counted: complete() returned False to both attempts",
    "ok: the job ended failed after 2 attempts and never completed",
    # b) jobq-supervise
    "ok: one attempt started",
    "ok: it ran 8.",
    "ok: its ack was accepted",
    "ok: no ack was refused",
    "ok: the job is completed; none of its type is pending or in progress",
    "PASS: 11 checks",
]


def run_demo(*args: str, cwd: Path) -> str:
    # No JOBQ_* of the test's own: the default DSN must come from the demo itself.
    env = {name: value for name, value in os.environ.items() if not name.startswith("JOBQ_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_DIR), env.get("PYTHONPATH")]))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    result = subprocess.run(
        [sys.executable, "-m", "jobq", "demo", "lease", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    missing = [line for line in EXPECTED if line not in result.stdout]
    assert not missing, f"missing {missing} in:\n{output}"
    assert "FAIL" not in result.stdout, output
    # Every process it named (workers, the supervisor and its workers) is gone.
    pids = [int(pid) for pid in re.findall(r"\bpid (\d+)", result.stdout)]
    assert len(pids) == 5, output
    assert not [pid for pid in pids if alive(pid)], output
    return result.stdout


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# SQLite is the next test's, through the demo's own default. The demo's SQL is the backends'
# own, which the integration tests run on MariaDB; one server database shows the --dsn path.
@pytest.mark.databases("postgresql")
def test_demo_lease(dsn: str, tmp_path: Path) -> None:
    output = run_demo("--dsn", dsn, cwd=tmp_path)
    # Shown without its password (the test databases have none, but the line must be there).
    assert "database: " in output


def test_demo_lease_defaults_to_a_temporary_sqlite_file(tmp_path: Path) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    output = run_demo(cwd=cwd)
    match = re.search(r"^database: sqlite:///(/\S+)$", output, re.MULTILINE)
    assert match, output
    database = Path(match[1])
    assert not database.is_relative_to(cwd)
    # Neither the working directory nor the temporary one keeps anything.
    assert list(cwd.iterdir()) == []
    assert not database.parent.exists()
