"""deploy/systemd/jobq-supervise.service: stopping the unit must be the master's drain.

systemd cannot run in the tests; what a stop does under the unit's settings is tested with
real processes in test_supervisor_signals.py (a TERM to the master, and to its whole group).
"""

from __future__ import annotations

import shlex

import pytest

from jobq.supervisor.helpers import HOUSEKEEPER_GRACE
from jobq.supervisor.master import LOOP_TICK
from tests.support.configs import supervisor_config
from tests.support.paths import REPO

UNIT = REPO / "deploy" / "systemd" / "jobq-supervise.service"


def sections() -> dict[str, dict[str, list[str]]]:
    """The unit's settings by section; a key given again adds a value, as systemd reads it."""
    found: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = found.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return found


def service() -> dict[str, list[str]]:
    return sections()["Service"]


def environment() -> dict[str, str]:
    return dict(line.split("=", 1) for line in service()["Environment"])


def test_a_stop_sends_sigterm_to_the_master_alone() -> None:
    unit = service()
    # control-group, systemd's default, would signal every worker and job process at once.
    assert unit["KillMode"] == ["mixed"]
    assert unit.get("KillSignal", ["SIGTERM"]) == ["SIGTERM"]
    # The master is the main process: no shell in front of it to swallow the signal.
    assert unit["Type"] == ["exec"]
    assert shlex.split(unit["ExecStart"][0])[0].endswith("/jobq-supervise")
    assert shlex.split(unit["ExecReload"][0])[1:] == ["-HUP", "$MAINPID"]


def test_the_stop_timeout_outlasts_the_drain(monkeypatch: pytest.MonkeyPatch) -> None:
    config = supervisor_config(environment(), monkeypatch)
    assert config.problems() == []
    drain = config.graceful_timeout + config.kill_grace
    # After the drain, the master waits for its housekeeper and fence keeper to finish.
    after = 2 * HOUSEKEEPER_GRACE + LOOP_TICK
    assert float(service()["TimeoutStopSec"][0]) > drain + after


def test_the_unit_keeps_the_password_out_and_does_not_retry_a_refusal() -> None:
    unit = service()
    assert "JOBQ_DSN" not in environment()
    assert unit["EnvironmentFile"], "the DSN comes from a file only root can read"
    # jobq-supervise exits 2 when it refuses to start: starting again would not help.
    assert unit["RestartPreventExitStatus"] == ["2"]
