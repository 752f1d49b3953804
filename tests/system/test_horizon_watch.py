"""The supervisor watches what holds back the database's cleanup of dead rows: a session that
holds a snapshot is named in a warning once it has held it past --horizon-warning, its age is
exported, and its release is logged."""

from __future__ import annotations

import math
import signal

import pytest

import jobq
from tests.support import drivers
from tests.support.supervising import FAST, metrics_port, scrape, supervisor
from tests.support.waiting import wait_for

WATCHING = ("--horizon-warning", "1", "--maintenance-interval", "0.5", "--metrics-port", "0")


@pytest.mark.databases("postgresql", "mariadb")
def test_a_session_holding_a_snapshot_is_named_exported_and_its_release_logged(
    dsn: str, db_kind: str
) -> None:
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
    reader = drivers.connect(dsn, db_kind, autocommit=True)
    try:
        with supervisor(dsn, *FAST, *WATCHING) as running:
            port = metrics_port(running)
            holder = drivers.hold_snapshot(reader, db_kind)
            assert holder is not None
            running.wait_for_log("held back the database's cleanup of dead rows for")
            warning = next(line for line in running.lines if "held back" in line)
            assert holder in warning, warning

            def exported() -> float | None:
                age = scrape(port).value("jobq_database_horizon_age_seconds")
                return age if not math.isnan(age) and age >= 1 else None

            wait_for("the holder's age in the metrics", exported, 30)
            reader.rollback()
            running.wait_for_log("no longer holds back the database's cleanup")
            running.signal(signal.SIGTERM)
            assert running.wait(30) == 0, running.log
    finally:
        reader.close()
