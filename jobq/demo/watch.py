"""Watching one phase of the demo from outside, as an operator would: the job's journal, its
workers' JSON log records and the database, until the job has settled."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..outcomes import LEASE_EXPIRED
from ..queue import Queue
from ..records import JobRecord, Status
from ..testing.history import read_journal
from .processes import Started

POLL = 0.1
TERMINAL = (Status.COMPLETED, Status.FAILED, Status.EXPIRED)


def attempts_of(path: Path, job_id: int) -> list[dict[str, Any]]:
    return [entry for entry in read_journal(path) if entry["job"] == job_id]


@dataclass(frozen=True)
class Event:
    at: float  # seconds since the phase began
    pid: int | None  # the process it happened in, when known
    kind: str  # start, end, accepted, refused, failed, exited
    attempt: int | None
    text: str


@dataclass
class Observed:
    """What one phase did to its job, as seen from outside the workers."""

    job_id: int
    events: list[Event]
    names: dict[int, str]
    record: JobRecord | None
    counts: dict[str, int]
    problem: str | None  # why the phase stopped before the job settled, if it did
    pids: list[int] = field(default_factory=list)

    def of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]

    def name(self, pid: int | None) -> str:
        if pid is None:
            return "--"
        return self.names.get(pid, f"pid {pid}")


class Watch:
    """Polls the journal, the logs and the database until the phase's job has settled."""

    def __init__(
        self,
        queue: Queue,
        job_id: int,
        journal: Path,
        processes: Sequence[Started],
        began: float,
        supervised: bool,
    ) -> None:
        self.queue = queue
        self.job_id = job_id
        self.journal = journal
        self.processes = processes
        self.began = began
        self.supervised = supervised
        self.record: JobRecord | None = None
        self.terminal_seen: float | None = None

    def records(self) -> list[tuple[float, dict[str, Any]]]:
        """Every log record of the phase's processes, with when it was read."""
        found = []
        for process in self.processes:
            for line in list(process.lines):
                record = line.record()
                if record is not None:
                    found.append((line.at, record))
        return sorted(found, key=lambda item: item[0])

    def events(self) -> list[Event]:
        events = []
        for entry in attempts_of(self.journal, self.job_id):
            attempt = int(str(entry["attempt"]))
            at = float(str(entry["mono"])) - self.began
            pid = int(str(entry["pid"]))
            if entry["event"] == "start":
                events.append(Event(at, pid, "start", attempt, f"started attempt {attempt}"))
            else:
                events.append(Event(at, pid, "end", attempt, f"attempt {attempt} ran to its end"))
        running = {e.pid for e in events if e.kind == "start"}
        for read, record in self.records():
            at, pid, event = read - self.began, record["pid"], record["event"]
            ours = record.get("job_id") == self.job_id
            if ours and event == "completed":
                attempt = record["attempt"]
                text = f"attempt {attempt} ended, ack accepted"
                events.append(Event(at, pid, "accepted", attempt, text))
            elif ours and event == "lost" and pid in running:
                # The worker's own record: its attempt no longer owned the job.
                attempt = record["attempt"]
                text = f"attempt {attempt} ended, ack refused: complete() returned False"
                events.append(Event(at, pid, "refused", attempt, text))
            elif event == "worker_exited" and record["worker"] in running:
                # Only the master logs this, about a worker that ran our job.
                text = f"worker exited ({record['exit']})"
                events.append(Event(at, record["worker"], "exited", None, text))
        if failed := self.failure():
            events.append(failed)
        return sorted(events, key=lambda e: e.at)

    def failure(self) -> Event | None:
        """The job's failure, if it failed other than by an attempt's own error: that is
        maintenance recovering its last attempt, which the worker that did it logs."""
        record, seen = self.record, self.terminal_seen
        if record is None or seen is None or record.status is not Status.FAILED:
            return None
        if record.last_error == LEASE_EXPIRED:
            text = (
                f"job failed: maintenance found attempt {record.attempts}'s lease over, "
                "with no attempt left"
            )
        else:
            # A traceback's last line holds the exception.
            text = "job failed: " + ((record.last_error or "").strip().splitlines() or [""])[-1]
        for read, entry in self.records():
            # Recovering the last attempt is what failed the job.
            last = (entry.get("job_id"), entry.get("attempt")) == (self.job_id, record.attempts)
            if entry["event"] == "recovered" and last:
                return Event(read - self.began, entry["pid"], "failed", None, text)
        return Event(seen - self.began, None, "failed", None, text)

    def names(self) -> dict[int, str]:
        """w1, w2… in the order the workers were started."""
        if self.supervised:
            pids = [r["worker"] for _, r in self.records() if r["event"] == "spawned"]
        else:
            pids = [process.pid for process in self.processes]
        return {pid: f"w{number}" for number, pid in enumerate(pids, 1)}

    def settled(self, events: list[Event]) -> bool:
        """The job is finished and every run of it has ended, with an ack or with its
        worker."""
        if self.record is None or self.record.status not in TERMINAL:
            return False
        starts = [e for e in events if e.kind == "start"]
        ended = {(e.pid, e.attempt) for e in events if e.kind in ("accepted", "refused")}
        gone = {e.pid for e in events if e.kind == "exited"}
        return bool(starts) and all((s.pid, s.attempt) in ended or s.pid in gone for s in starts)

    def wait(self, timeout: float) -> str | None:
        """Poll until the job settles; returns why it did not, or None."""
        deadline = self.began + timeout
        while True:
            self.record = self.queue.get(self.job_id)
            now = time.monotonic()
            if self.record is not None and self.record.status in TERMINAL:
                self.terminal_seen = self.terminal_seen or now
            if self.settled(self.events()):
                return None
            for process in self.processes:
                if not process.running():
                    return f"{process.label} exited early, code {process.popen.returncode}"
            if now >= deadline:
                status = self.record.status if self.record else "gone"
                return f"the job did not settle within {timeout:g} s (status {status})"
            time.sleep(POLL)

    def observe(self, problem: str | None) -> Observed:
        return Observed(
            job_id=self.job_id,
            events=self.events(),
            names=self.names(),
            record=self.queue.get(self.job_id),
            counts=self.queue.counts(self.record.type if self.record else None),
            problem=problem,
            pids=[process.pid for process in self.processes],
        )
