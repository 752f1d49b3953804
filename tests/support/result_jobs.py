"""Jobs that answer, report progress and keep checkpoints, for the results tests; run in the
test's own process or, put on PYTHONPATH's tests package, in another one."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import jobq
from tests.support.waiting import wait_for


class Answer(jobq.Job):
    """Returns what it was given."""

    job_name = "results.Answer"
    type = "answer"

    def __init__(self, value: Any) -> None:
        self.value = value

    def handle(self) -> Any:
        return self.value


class Unstorable(jobq.Job):
    """Returns what no codec stores: a set, or a string past the result bound."""

    job_name = "results.Unstorable"
    type = "answer"

    def __init__(self, size: int) -> None:
        self.size = size

    def handle(self) -> object:
        return {1, 2} if self.size == 0 else "x" * self.size


class Resume(jobq.Job):
    """Counts to `rows`, one checkpoint and progress a row, from where the last attempt's
    checkpoint left off; fails its first attempt at row `fail_at`."""

    job_name = "results.Resume"
    type = "answer"

    def __init__(self, rows: int, fail_at: int) -> None:
        self.rows = rows
        self.fail_at = fail_at

    def handle(self) -> dict[str, int]:
        claim = jobq.current_claim()
        assert claim is not None
        start = (claim.checkpoint or {"row": 0})["row"]
        for row in range(start, self.rows):
            if claim.attempt == 1 and row == self.fail_at:
                raise RuntimeError(f"stopped at row {row}")
            jobq.progress(row + 1, self.rows, note="rows")
            assert jobq.checkpoint({"row": row + 1})
        return {"from": start, "attempt": claim.attempt}


class ResumeAsync(Resume):
    """Resume as a coroutine, which a worker with --concurrency runs on its event loop."""

    job_name = "results.ResumeAsync"

    async def handle(self) -> dict[str, int]:  # type: ignore[override]
        await asyncio.sleep(0)
        return Resume.handle(self)


class Gate(jobq.Job):
    """Waits for a file to appear, then returns its text."""

    job_name = "results.Gate"
    type = "gate"

    def __init__(self, path: str) -> None:
        self.path = path

    def handle(self) -> str:
        gate = Path(self.path)
        wait_for(f"{gate} to appear", gate.exists, timeout=120)
        return gate.read_text()


def report(path: Path, text: str) -> None:
    """Whole or not at all: the test reads the file as soon as it exists."""
    written = path.with_suffix(".partial")
    written.write_text(text)
    written.rename(path)


class Stale(jobq.Job):
    """Its first attempt reports, says so by a file, waits for the word to go on (meanwhile
    it is SIGSTOPped and replaced), then reports again and records whether its writes
    landed; later attempts report and wait for their own word."""

    job_name = "results.Stale"
    type = "stale"

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def handle(self) -> str:
        claim = jobq.current_claim()
        assert claim is not None
        folder, n = Path(self.folder), claim.attempt
        jobq.progress(n, note=f"attempt {n}")
        landed = jobq.checkpoint({"attempt": n})
        report(folder / f"started{n}", str(landed))
        wait_for(f"go{n}", (folder / f"go{n}").exists, timeout=120)
        jobq.progress(100 + n, note=f"attempt {n} again")
        report(folder / f"wrote{n}", str(jobq.checkpoint({"attempt": n, "again": True})))
        return f"attempt {n}"
