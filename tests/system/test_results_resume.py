"""A retried job resumes from its checkpoint: workers SIGKILLed inside a resumable import,
the run judged by the history checker (no attempt overlapped, no job lost), and each next
attempt started from the row its killed predecessor's last checkpoint reached."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jobq
from chaos.observe import Deaths, Observer, in_handle
from jobq.testing.history import read_journal
from tests.support.apps.chaos_app import ResumableImport
from tests.support.faults import SETTINGS, all_completed, busy, ended, judged, records_of
from tests.support.supervising import Supervisor, supervisor
from tests.support.waiting import wait_for

ROWS, STEP = 20, 0.1


def rows_done(entries: list[dict[str, Any]], start: Mapping[str, Any]) -> int:
    """The last row the attempt of `start` journaled, after saving its checkpoint."""
    key = (start["job"], start["attempt"], start["pid"])
    done = [
        e["row"]
        for e in entries
        if e["event"] == "row" and (e["job"], e["attempt"], e["pid"]) == key
    ]
    return max(done, default=0)


def kill_two_rows_in(journal: Path, deaths: Deaths, running: Supervisor) -> Mapping[str, Any]:
    """SIGKILL a worker at least two rows into an import with some left to go."""

    def ripe() -> list[Mapping[str, Any]]:
        entries = read_journal(journal)
        return [
            e
            for e in in_handle(entries, busy([running]), at_least=0.4)
            if rows_done(entries, e) - e["resumed"] >= 2
        ]

    victim = wait_for("a worker two rows into an import", ripe, timeout=60)[0]
    deaths.kill(victim["pid"])
    assert deaths.wait_gone([victim["pid"]], timeout=5), f"worker {victim['pid']} survived"
    return victim


def test_a_retried_import_resumes_from_its_checkpoint_under_worker_kills(
    dsn: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        ids = [queue.enqueue(ResumableImport(ROWS, STEP, str(journal))) for _ in range(4)]
    observer = Observer(dsn)
    with Deaths() as deaths, supervisor(dsn, "--workers", "2", *SETTINGS) as running:
        deaths.family(running.pid)
        victims = [kill_two_rows_in(journal, deaths, running) for _ in range(2)]
        wait_for("every import to complete", lambda: all_completed(observer, len(ids)), 90)
        records = records_of(observer, ids)
        judged(journal, deaths, records)
    observer.close()

    entries = read_journal(journal)
    resumed = 0
    for victim in victims:
        if ended(entries, victim):
            continue  # it finished first after all (a loaded machine)
        reached = rows_done(entries, victim)
        (following,) = [
            e
            for e in entries
            if e["event"] == "start"
            and e["job"] == victim["job"]
            and e["attempt"] == victim["attempt"] + 1
        ]
        # Killed between a checkpoint and its journal line, it reached one row more.
        assert reached <= following["resumed"] <= reached + 1, (victim, following)
        resumed += 1
    assert resumed, "no kill landed inside an import"
    for record in records:
        assert record.checkpoint is None
        assert record.progress == (ROWS, ROWS, None)
        assert record.result["resumed"] == max(
            e["resumed"] for e in entries if e["event"] == "start" and e["job"] == record.id
        )
