"""The alert rules under promtool (tests/unit/test_prometheus_rules.py reads the rules and the
Grafana dashboard as files)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.dashboards import (
    ALERT_RULES,
    ALERT_TESTS,
    REPO_DIR,
    alert_queries,
)

PROMTOOL_TIMEOUT = 60.0


def promtool(*args: str) -> str:
    exe = shutil.which("promtool")
    if exe is None:
        pytest.fail("promtool is not installed; scripts/install-test-deps installs it")
    try:
        done = subprocess.run(
            [exe, *args],
            cwd=REPO_DIR,
            capture_output=True,
            text=True,
            timeout=PROMTOOL_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"promtool {' '.join(args)} did not finish in {PROMTOOL_TIMEOUT} s: {exc}")
    output = done.stdout + done.stderr
    if done.returncode != 0:
        pytest.fail(f"promtool {' '.join(args)} exited with {done.returncode}:\n{output}")
    return output


def relative(path: Path) -> str:
    return str(path.relative_to(REPO_DIR))


def test_promtool_check_rules() -> None:
    output = promtool("check", "rules", relative(ALERT_RULES))
    # promtool counts the rules it parsed; it must agree with what the helpers read.
    assert f"SUCCESS: {len(alert_queries())} rules found" in output, output


def test_promtool_test_rules() -> None:
    promtool("test", "rules", relative(ALERT_TESTS))
