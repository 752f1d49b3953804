"""Durable jobs for the steps' tests: each step appends a line to a journal file as it runs,
and another once its record is back, so that a test (or a killer) sees which ran when; run
in the test's own process or, with the tests package on PYTHONPATH, in a worker."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import jobq
from tests.support.waiting import wait_lease_ended


def note(journal: str, **entry: Any) -> None:
    claim = jobq.current_claim()
    assert claim is not None
    entry |= {"job": claim.id, "attempt": claim.attempt, "pid": os.getpid()}
    with open(journal, "a") as file:
        file.write(json.dumps(entry) + "\n")
        file.flush()
        os.fsync(file.fileno())


def entries(journal: Path) -> list[dict[str, Any]]:
    if not journal.exists():
        return []
    return [json.loads(line) for line in journal.read_text().splitlines() if line]


def finished(queue: jobq.Queue, job_id: int) -> jobq.JobRecord | None:
    """Run what is ready; the job's record once it has ended (to poll with wait_for)."""
    queue.process_jobs(1)
    record = queue.get(job_id)
    assert record is not None
    return record if record.status is not jobq.Status.PENDING else None


class Steps(jobq.Job):
    """`count` steps, each returning its number and key; between two steps it waits `pause`
    seconds; its first attempt raises after step `fail_after`, outside any step."""

    job_name = "steps.Steps"
    type = "steps"

    def __init__(self, count: int, journal: str, fail_after: int = -1, pause: float = 0.0) -> None:
        self.count = count
        self.journal = journal
        self.fail_after = fail_after
        self.pause = pause

    def run(self, n: int) -> dict[str, Any]:
        note(self.journal, event="ran", step=n, key=jobq.step_key())
        if self.pause:
            time.sleep(self.pause)  # inside the step: a kill here lands before its record
        return {"n": n, "key": jobq.step_key()}

    def handle(self) -> list[Any]:
        claim = jobq.current_claim()
        assert claim is not None
        values = []
        for n in range(self.count):
            values.append(jobq.step(f"step-{n}", self.run, n))
            note(self.journal, event="recorded", step=n)
            if self.pause:
                time.sleep(self.pause)  # between steps: a kill here lands after a record
            if n == self.fail_after and claim.attempt == 1:
                raise RuntimeError(f"failing after step {n}")
        return values


class AsyncSteps(Steps):
    """Steps as a coroutine: its steps are coroutine functions, awaited by jobq.astep."""

    job_name = "steps.AsyncSteps"

    async def arun(self, n: int) -> dict[str, Any]:
        await asyncio.sleep(0)
        note(self.journal, event="ran", step=n, key=jobq.step_key())
        if self.pause:
            await asyncio.sleep(self.pause)
        return {"n": n, "key": jobq.step_key()}

    async def handle(self) -> list[Any]:  # type: ignore[override]
        claim = jobq.current_claim()
        assert claim is not None
        values: list[Any] = []
        for n in range(self.count):
            values.append(await jobq.astep(f"step-{n}", self.arun, n))
            note(self.journal, event="recorded", step=n)
            if self.pause:
                await asyncio.sleep(self.pause)
            if n == self.fail_after and claim.attempt == 1:
                raise RuntimeError(f"failing after step {n}")
        return values


class Flaky(jobq.Job):
    """One step that raises its first `failures` times, retried in place by `retry`."""

    job_name = "steps.Flaky"
    type = "steps"

    def __init__(self, journal: str, failures: int, tries: int) -> None:
        self.journal = journal
        self.failures = failures
        self.tries = tries

    def charge(self) -> str:
        note(self.journal, event="ran", step=0, key=jobq.step_key())
        if len([e for e in entries(Path(self.journal)) if e["event"] == "ran"]) <= self.failures:
            raise ConnectionError("the provider did not answer")
        return "charged"

    def handle(self) -> str:
        retry = jobq.RetryPolicy(max_attempts=self.tries, backoff=0, jitter=False)
        return jobq.step("charge", self.charge, retry=retry)


class Twice(jobq.Job):
    """Uses one step name twice in one run."""

    job_name = "steps.Twice"
    type = "steps"

    def handle(self) -> None:
        jobq.step("same", lambda: 1)
        jobq.step("same", lambda: 2)


class Sleeper(jobq.Job):
    """A step, a durable sleep of `seconds`, another step."""

    job_name = "steps.Sleeper"
    type = "steps"

    def __init__(self, journal: str, seconds: float) -> None:
        self.journal = journal
        self.seconds = seconds

    def ran(self, n: int) -> int:
        note(self.journal, event="ran", step=n)
        return n

    def handle(self) -> list[int]:
        before = jobq.step("before", self.ran, 0)
        jobq.sleep(self.seconds)
        return [before, jobq.step("after", self.ran, 1)]


class AsyncSleeper(Sleeper):
    """Sleeper as a coroutine."""

    job_name = "steps.AsyncSleeper"

    async def handle(self) -> list[int]:  # type: ignore[override]
        before = await jobq.astep("before", self.ran, 0)
        jobq.sleep(self.seconds)
        return [before, await jobq.astep("after", self.ran, 1)]


class Snoozer(jobq.Job):
    """Snoozes its first `times` runs, whatever catches exceptions around it."""

    job_name = "steps.Snoozer"
    type = "steps"

    def __init__(self, journal: str, times: int) -> None:
        self.journal = journal
        self.times = times

    def handle(self) -> int:
        note(self.journal, event="run", step=0)
        runs = len(entries(Path(self.journal)))
        try:
            if runs <= self.times:
                jobq.snooze(0)
        except Exception:
            raise AssertionError("a snooze is no Exception to catch") from None
        return runs


class Ledger(jobq.Job):
    """A step that writes a row of `ledger` on the job's own connection, with its record
    (transaction=True); optionally it outlives its first attempt's lease inside the step, or
    pauses there after its write, and its first attempt fails after the step."""

    job_name = "steps.Ledger"
    type = "steps"

    def __init__(
        self,
        journal: str,
        dsn: str = "",
        outlive: bool = False,
        fail: bool = False,
        pause: float = 0.0,
    ) -> None:
        self.journal = journal
        self.dsn = dsn
        self.outlive = outlive
        self.fail = fail
        self.pause = pause

    def write(self, connection: Any) -> int:
        claim = jobq.current_claim()
        assert claim is not None
        mark = "?" if isinstance(connection, sqlite3.Connection) else "%s"
        cursor = connection.cursor()
        try:
            sql = f"INSERT INTO ledger (job_id, attempt) VALUES ({mark}, {mark})"
            cursor.execute(sql, (claim.id, claim.attempt))
        finally:
            cursor.close()
        note(self.journal, event="ran", step=0)
        if self.outlive and claim.attempt == 1:
            with jobq.Queue.connect(self.dsn) as other:
                wait_lease_ended(other, claim.id)
        time.sleep(self.pause)  # written, not committed: a kill here leaves neither
        return claim.attempt

    def handle(self) -> int:
        claim = jobq.current_claim()
        assert claim is not None
        written = jobq.step("debit", self.write, transaction=True)
        if self.fail and claim.attempt == 1:
            raise RuntimeError("failing after the step")
        return written


class Waiter(jobq.Job):
    """A step, a wait for event `key` (a timeout taken as its payload), another step."""

    job_name = "steps.Waiter"
    type = "steps"

    def __init__(self, journal: str, key: str, timeout: float | None = None) -> None:
        self.journal = journal
        self.key = key
        self.timeout = timeout

    def ran(self, n: int) -> int:
        note(self.journal, event="ran", step=n)
        return n

    def handle(self) -> Any:
        jobq.step("before", self.ran, 0)
        try:
            payload = jobq.wait_for(self.key, timeout=self.timeout)
        except jobq.EventTimeout:
            payload = "timed out"
        jobq.step("after", self.ran, 1)
        return payload
