"""One job's attempts journalled from every process they work in (supervised_app.Attempted),
watched by chaos.observe.Deaths and judged by the history checker: the pieces shared by the
tests that cut an attempt short (test_attempt_fencing.py, test_cancel_running.py)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jobq
from chaos.observe import Deaths
from jobq.records import Status
from jobq.testing.history import check, read_journal
from tests.support.apps.supervised_app import Attempted
from tests.support.supervising import FAST, Supervisor, supervisor
from tests.support.waiting import wait_for

KINDS = ("plain", "subprocess", "daemon", "gil")
# The retry waits half a second, so that its start comes after the moment the watcher saw
# attempt 1's processes die, however busy the machine (see tests/support/apps/chaos_app.py).
RETRY = jobq.RetryPolicy(max_attempts=3, backoff=0.5, max_backoff=0.5, jitter=False)
LEASE = 6.0


@dataclass
class Case:
    """One run: the job, where it journals, who watches, and how to start a supervisor."""

    queue: jobq.Queue
    dsn: str
    journal: Path
    deaths: Deaths
    job_id: int

    @contextmanager
    def supervise(self, *args: str, dsn: str | None = None) -> Iterator[Supervisor]:
        with supervisor(dsn or self.dsn, "--workers", "1", *FAST, *args) as running:
            self.deaths.family(running.pid)
            yield running

    def first_attempt_started(self, running: Supervisor, kind: str) -> list[int]:
        """The pids of attempt 1's processes, once each has journaled its start."""
        wanted = 2 if kind in ("subprocess", "daemon") else 1

        def started() -> list[int]:
            pids = [e["pid"] for e in self.entries() if e["event"] == "start"]
            return pids if len(pids) >= wanted else []

        pids = wait_for(f"attempt 1 to start; log:\n{running.log}", started, 30)
        for pid in pids:
            self.deaths.watch(pid)
        return pids

    def entries(self) -> list[dict[str, Any]]:
        return [e for e in read_journal(self.journal) if e["job"] == self.job_id]

    def wait_gone(self, pids: list[int], timeout: float, running: Supervisor) -> None:
        assert self.deaths.wait_gone(pids, timeout), (
            f"attempt 1's processes {pids} outlived {timeout} s; log:\n{running.log}"
        )

    def wait_completed(self, running: Supervisor, timeout: float = 30) -> None:
        def completed() -> bool:
            record = self.queue.get(self.job_id)
            return record is not None and record.status is Status.COMPLETED

        wait_for(f"job {self.job_id} to complete; log:\n{running.log}", completed, timeout)

    def judge(self, cut_short: bool = True) -> None:
        entries = read_journal(self.journal)
        record = self.queue.get(self.job_id)
        assert record is not None
        report = check(entries, [record], self.deaths.exits_for(entries))
        assert report.ok, f"{report.summary()}\n{entries}"
        if cut_short:
            assert report.unfinished, "attempt 1 was not cut short: the test proved nothing"
        assert record.attempts >= 2, record


@contextmanager
def enqueued(
    queue: jobq.Queue, dsn: str, tmp_path: Path, kind: str, ending: str = "hold"
) -> Iterator[Case]:
    journal = tmp_path / "journal"
    job_id = queue.enqueue(Attempted(str(journal), kind, ending=ending), retry=RETRY)
    with Deaths() as deaths:
        yield Case(queue, dsn, journal, deaths, job_id)


def stop(running: Supervisor) -> None:
    running.signal(signal.SIGTERM)
    assert running.wait(30) == 0, running.log
