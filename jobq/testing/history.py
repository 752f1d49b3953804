"""Check a run's history against jobq's promise: no job lost, no two attempts of one job
running at the same time, and no more attempts of one concurrency key running at once than
its limit allows.

The evidence is an append-only journal that jobs write as they run (journal_attempt: one
line at the start and one at the end of each attempt, which survives a SIGKILL of the
writer), the final state of the jobs table, and, for attempts that never wrote their end,
when their process was last seen alive or first seen gone.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..queue.running import current_claim
from ..records import JobRecord, Status


def journal_event(path: str | os.PathLike[str], event: str, **fields: Any) -> None:
    """Append one event of this process to the journal, with its pid and `fields`.

    A single short write to a file opened for appending: lines from many processes never
    interleave, and a line written survives its writer being killed.
    """
    with open(path, "a") as journal:
        journal.write(json.dumps({"event": event, "pid": os.getpid(), **fields}) + "\n")


def journal_attempt(path: str | os.PathLike[str], event: str, **fields: Any) -> None:
    """Append one event of the running attempt ("start" or "end") to the journal, with the
    job, the attempt and the clocks' readings (see journal_event)."""
    claim = current_claim()
    if claim is None:
        raise RuntimeError("journal_attempt() is for use inside a job's handle()")
    journal_event(
        path,
        event,
        job=claim.id,
        attempt=claim.attempt,
        mono=time.monotonic(),
        wall=time.time(),
        **fields,
    )


def read_journal(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    file = Path(path)
    if not file.exists():
        return []
    # A writer killed mid-line leaves a torn last line; it carries no evidence.
    entries = []
    for line in file.read_text().splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    return entries


@dataclass(frozen=True)
class Attempt:
    job: int
    attempt: int
    pid: int
    start: float  # monotonic
    end: float | None  # monotonic; None when it never said it ended and its exit is unknown
    ended: bool  # it wrote its end itself
    key: str | None = None  # its concurrency key, as its start line gave it ("key")


@dataclass
class Report:
    jobs: int = 0
    attempts_run: int = 0
    attempts_counted: int = 0
    overlaps: list[tuple[Attempt, Attempt]] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)
    unfinished: list[Attempt] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    # (key, when, how many ran) at each moment one key ran more attempts than its limit.
    crowded: list[tuple[str, float, int]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.overlaps and not self.lost and not self.crowded

    def summary(self) -> str:
        lines = [
            f"jobs: {self.jobs}",
            f"attempts run: {self.attempts_run} (counted by the database: {self.attempts_counted})",
            f"killed mid-run: {len(self.unfinished)}",
            f"final statuses: {dict(sorted(self.statuses.items()))}",
            f"overlaps: {len(self.overlaps)}",
            f"lost: {len(self.lost)}",
            f"over a concurrency limit: {len(self.crowded)}",
        ]
        for first, second in self.overlaps[:10]:
            lines.append(
                f"  overlap: job {first.job} attempt {first.attempt} (pid {first.pid}) and "
                f"attempt {second.attempt} (pid {second.pid})"
            )
        if self.lost:
            lines.append(f"  lost jobs: {self.lost[:20]}")
        for key, when, running in self.crowded[:10]:
            lines.append(f"  key {key!r}: {running} attempts at once at {when:.3f}")
        return "\n".join(lines)


def attempts(entries: Iterable[Mapping[str, Any]], exits: Mapping[int, float]) -> list[Attempt]:
    """Pair starts with ends. An attempt without an end ended when its process did, if that
    is known (exits: pid -> the monotonic time it was first seen gone), else never."""
    starts: dict[tuple[int, int, int], float] = {}
    ends: dict[tuple[int, int, int], float] = {}
    limit_keys: dict[tuple[int, int, int], str] = {}
    for entry in entries:
        key = (int(entry["job"]), int(entry["attempt"]), int(entry["pid"]))
        if entry["event"] == "start":
            starts[key] = float(entry["mono"])
            if "key" in entry:
                limit_keys[key] = str(entry["key"])
        elif entry["event"] == "end":
            ends[key] = float(entry["mono"])
    found = []
    for key, start in starts.items():
        job, attempt, pid = key
        end = ends.get(key, exits.get(pid))
        found.append(Attempt(job, attempt, pid, start, end, key in ends, limit_keys.get(key)))
    return sorted(found, key=lambda a: (a.job, a.start))


def overlapping(runs: list[Attempt]) -> list[tuple[Attempt, Attempt]]:
    """Pairs of attempts of one job whose running times intersect (an open end counts as
    running for ever, so an attempt whose end is unknown overlaps everything after it).

    An attempt may journal from several processes (its worker, and the subprocesses its job
    runs, each with its own pid): those run at once by design; each must end before any
    process of another attempt starts."""
    pairs = []
    by_job: dict[int, list[Attempt]] = defaultdict(list)
    for run in runs:
        by_job[run.job].append(run)
    for job_runs in by_job.values():
        for i, first in enumerate(job_runs):
            for second in job_runs[i + 1 :]:
                if first.attempt == second.attempt:
                    continue
                if first.end is None or second.start < first.end:
                    pairs.append((first, second))
    return pairs


def crowded(runs: list[Attempt], limit: int) -> list[tuple[str, float, int]]:
    """The moments when more than `limit` attempts of one key ran: (key, when, how many).

    An attempt runs from its first start to its last end over all its processes; an open
    end runs for ever. At one instant an end comes before a start: a slot handed on is not
    two attempts at once."""
    spans: dict[tuple[int, int], tuple[str, float, float]] = {}
    for run in runs:
        if run.key is None:
            continue
        end = math.inf if run.end is None else run.end
        key, start, last = spans.get((run.job, run.attempt), (run.key, run.start, end))
        spans[(run.job, run.attempt)] = (key, min(start, run.start), max(last, end))
    moments: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for key, start, end in spans.values():
        moments[key] += [(start, 1), (end, -1)]
    found = []
    for key, changes in moments.items():
        running = 0
        for when, change in sorted(changes):
            running += change
            if running > limit:
                found.append((key, when, running))
    return found


def is_settled(record: JobRecord) -> bool:
    """Completed, cancelled, or finished by its policy: failed with its attempts used up, or
    expired."""
    if record.status in (Status.COMPLETED, Status.EXPIRED, Status.CANCELLED):
        return True
    return record.status is Status.FAILED and record.attempts >= record.retry.max_attempts


def check(
    entries: Iterable[Mapping[str, Any]],
    records: Iterable[JobRecord],
    exits: Mapping[int, float] | None = None,
    limit: int | None = None,
) -> Report:
    """The report for a finished run: `records` are the jobs as the database holds them at
    the end, after everything that was going to run has run. With `limit`, the attempts
    whose start line gave a concurrency key ("key") are held to that many per key."""
    runs = attempts(entries, exits or {})
    report = Report(attempts_run=len(runs))
    report.overlaps = overlapping(runs)
    report.crowded = [] if limit is None else crowded(runs, limit)
    report.unfinished = [run for run in runs if not run.ended]
    for record in records:
        report.jobs += 1
        report.attempts_counted += record.attempts
        report.statuses[str(record.status)] = report.statuses.get(str(record.status), 0) + 1
        if not is_settled(record):
            report.lost.append(record.id)
    return report
