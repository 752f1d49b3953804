"""Jobs for the fault suite, the bad-input tests and the soak (`python -m chaos`).

Every attempt journals its start and end with jobq's own history journal, so the history
checker can prove no two attempts of one job overlapped. Workers load this module as
`chaos_app` (the tests put this folder on PYTHONPATH) while the tests and the soak import it
as `tests.support.apps.chaos_app`: every class names itself, so both register under the same
name.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import NoReturn

import jobq
from jobq.testing.history import journal_attempt
from jobq.testing.jobs import JournaledSleep

# Retried at once would be fine for jobq, but the checker learns when a killed worker died by
# watching it from the test process: a retry that waits half a second can never start before
# that observation, however busy the machine. Many attempts: every fault may cost one.
CHAOS_RETRY = jobq.RetryPolicy(max_attempts=25, backoff=0.5, max_backoff=1.0, jitter=False)


class Chaos(JournaledSleep):
    """Sleeps `seconds` between its journaled start and end."""

    job_name = "Chaos"
    type = "chaos"
    retry = CHAOS_RETRY


PROCESSES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attempt_processes.py")


class ChaosSubprocess(Chaos):
    """Does its sleeping in a subprocess, which journals its own start and end: the work
    that must die with the attempt, wherever it is killed."""

    job_name = "ChaosSubprocess"

    def handle(self) -> None:
        claim = jobq.current_claim()
        assert claim is not None
        journal_attempt(self.journal, "start", seconds=self.seconds)
        command = [sys.executable, PROCESSES, "run", self.journal, str(claim.id)]
        command += [str(claim.attempt), str(self.seconds)]
        subprocess.run(command, check=True, stdin=subprocess.DEVNULL)
        journal_attempt(self.journal, "end")


class ChaosSubprocessAsync(ChaosSubprocess):
    """ChaosSubprocess as a coroutine, its subprocess started with asyncio's API: cancelled,
    it must not leave the subprocess running past its attempt."""

    job_name = "ChaosSubprocessAsync"

    async def handle(self) -> None:  # type: ignore[override]
        claim = jobq.current_claim()
        assert claim is not None
        journal_attempt(self.journal, "start", seconds=self.seconds)
        command = [PROCESSES, "run", self.journal, str(claim.id), str(claim.attempt)]
        process = await asyncio.create_subprocess_exec(
            sys.executable, *command, str(self.seconds), stdin=subprocess.DEVNULL
        )
        if await process.wait():
            raise RuntimeError(f"its subprocess exited with {process.returncode}")
        journal_attempt(self.journal, "end")


class Padded(jobq.Job):
    """A job whose payload is as large as its padding: the payload-size limit's test."""

    job_name = "Padded"
    type = "chaos"

    def __init__(self, padding: str, journal: str) -> None:
        self.padding = padding
        self.journal = journal

    def handle(self) -> None:
        journal_attempt(self.journal, "start", size=len(self.padding))
        journal_attempt(self.journal, "end")


class Halt(BaseException):
    """A BaseException of the application's own: not an Exception, so no `except Exception`
    in a worker catches it."""


class Unprintable(Exception):
    """An exception whose message cannot even be turned into text."""

    def __str__(self) -> str:
        raise RuntimeError("__str__ failed on purpose")

    def __repr__(self) -> str:
        raise RuntimeError("__repr__ failed on purpose")


def recurse(depth: int) -> int:
    return recurse(depth + 1) + 1


def throw(error: BaseException) -> NoReturn:
    raise error


# How each kind of Raise job ends its handle(): all raise, but os._exit, which ends the worker
# process itself with its job in hand.
RAISERS: dict[str, Callable[[], object]] = {
    "ValueError": lambda: throw(ValueError("a bad value")),
    # Real recursion, not a raised RecursionError: the stack is exhausted inside the job.
    "RecursionError": lambda: recurse(0),
    "MemoryError": lambda: throw(MemoryError("raised, not run out of")),
    "Halt": lambda: throw(Halt("a BaseException subclass")),
    "SystemExit": lambda: sys.exit(3),
    "KeyboardInterrupt": lambda: throw(KeyboardInterrupt("inside a job")),
    "GeneratorExit": lambda: throw(GeneratorExit("raised inside a job")),
    "Unprintable": lambda: throw(Unprintable()),
    "os._exit": lambda: os._exit(7),
}


class Raise(jobq.Job):
    """Ends its handle() the way `kind` says (see RAISERS)."""

    job_name = "Raise"
    type = "chaos"

    def __init__(self, kind: str, journal: str) -> None:
        self.kind = kind
        self.journal = journal

    def handle(self) -> None:
        journal_attempt(self.journal, "start", kind=self.kind)
        RAISERS[self.kind]()
        journal_attempt(self.journal, "end")


class ChaosAsync(Chaos):
    """Chaos as a coroutine: its worker's event loop runs it as a task (--concurrency)."""

    job_name = "ChaosAsync"

    async def handle(self) -> None:  # type: ignore[override]
        journal_attempt(self.journal, "start", seconds=self.seconds)
        await asyncio.sleep(self.seconds)
        journal_attempt(self.journal, "end")


class ChaosToThread(Chaos):
    """A coroutine that hands its sleep to a thread (asyncio.to_thread), which journals the
    attempt's end: cancelled, the coroutine stops at once and the thread does not, so its
    attempt must end only with the thread."""

    job_name = "ChaosToThread"

    async def handle(self) -> None:  # type: ignore[override]
        journal_attempt(self.journal, "start", seconds=self.seconds)
        await asyncio.to_thread(self.sleep_and_end)

    def sleep_and_end(self) -> None:
        time.sleep(self.seconds)
        journal_attempt(self.journal, "end")


class Stubborn(Chaos):
    """A coroutine that swallows every cancel and sleeps on: only its worker's death stops it."""

    job_name = "Stubborn"

    async def handle(self) -> None:  # type: ignore[override]
        journal_attempt(self.journal, "start", seconds=self.seconds)
        deadline = time.monotonic() + self.seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                await asyncio.sleep(left)
            except asyncio.CancelledError:
                journal_attempt(self.journal, "swallowed")
        journal_attempt(self.journal, "end")


class ResumableImport(jobq.Job):
    """Imports `rows` rows of `step` seconds each, from the row its last attempt's checkpoint
    reached: each row is journaled ("row") once its checkpoint is saved."""

    job_name = "ResumableImport"
    type = "chaos"
    retry = CHAOS_RETRY

    def __init__(self, rows: int, step: float, journal: str) -> None:
        self.rows = rows
        self.step = step
        self.journal = journal

    def handle(self) -> dict[str, int]:
        claim = jobq.current_claim()
        assert claim is not None
        start = (claim.checkpoint or {"row": 0})["row"]
        left = (self.rows - start) * self.step
        journal_attempt(self.journal, "start", seconds=left, resumed=start)
        for row in range(start, self.rows):
            time.sleep(self.step)
            if not jobq.checkpoint({"row": row + 1}):
                raise RuntimeError("this attempt no longer holds the job")
            jobq.progress(row + 1, self.rows)
            journal_attempt(self.journal, "row", row=row + 1)
        journal_attempt(self.journal, "end")
        return {"resumed": start}


class OneAKey(jobq.Job):
    """Sleeps `seconds`; at most one attempt of a key runs at once."""

    job_name = "OneAKey"
    type = "one-a-key"
    concurrency = jobq.Concurrency(1, key=lambda job: job.key)

    def __init__(self, key: str, seconds: float) -> None:
        self.key = key
        self.seconds = seconds

    def handle(self) -> None:
        time.sleep(self.seconds)


class ChaosLimited(Chaos):
    """A Chaos job of which at most two of one key run at once; its journal lines carry the
    key, for the history checker's count."""

    job_name = "ChaosLimited"
    type = "chaos-limited"
    concurrency = jobq.Concurrency(2, key=lambda job: job.key)

    def __init__(self, seconds: float, journal: str, key: str) -> None:
        super().__init__(seconds, journal)
        self.key = key

    def journal_fields(self) -> dict[str, object]:
        return {"key": self.key}
