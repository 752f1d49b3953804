"""Jobs whose attempts start work that outlives their own code, if nothing stops it: a thread
a coroutine hands work to, a process a job starts and leaves running. Every piece journals
what it does with the job and attempt it belongs to, and its clock readings, so a test can
tell whether anything of one attempt happened after the job's next attempt began.

Run as a program, this module is the process such a job starts (see `main`):

    python handoff_app.py JOURNAL JOB ATTEMPT SECONDS READY [daemon]

It journals a `tick` every TICK seconds for SECONDS, then `end`, and closes the descriptor
READY (its starter's pipe) once it has ticked; with `daemon`, it first leaves its parent as a
daemonizing launcher does.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

import jobq

TICK = 0.05
ONE_RETRY = jobq.RetryPolicy(max_attempts=2, backoff=0, jitter=False)
PROGRAM = os.path.abspath(__file__)


def journal(path: str, event: str, job: int, attempt: int, **fields: object) -> None:
    """What journal_attempt writes, from anywhere: a thread without the attempt's context,
    or a process of its own."""
    entry = {"event": event, "job": job, "attempt": attempt, "pid": os.getpid(), **fields}
    entry.update(mono=time.monotonic(), wall=time.time())
    with open(path, "a") as file:
        file.write(json.dumps(entry) + "\n")


class Traced(jobq.Job):
    """A job that journals its attempt's start and end; its first attempt starts work that
    runs `seconds` (how: see the subclasses), its retry does nothing more."""

    job_name = "Traced"
    type = "handoff"
    retry = ONE_RETRY

    def __init__(self, seconds: float, journal: str, how: str) -> None:
        self.seconds = seconds
        self.journal = journal
        self.how = how

    @property
    def claim(self) -> jobq.ClaimedJob:
        claim = jobq.current_claim()
        assert claim is not None
        return claim

    def note(self, event: str) -> None:
        journal(self.journal, event, self.claim.id, self.claim.attempt, how=self.how)

    def command(self, ready: int) -> list[str]:
        """The process the first attempt starts, which closes `ready` once it ticked."""
        claim = self.claim
        command = [sys.executable, PROGRAM, self.journal, str(claim.id), str(claim.attempt)]
        command += [str(self.seconds), str(ready)]
        return [*command, *(["daemon"] if self.how == "daemon" else [])]

    def start(self, starter: Callable[..., object]) -> tuple[int, object]:
        """Start the process with `starter` (Popen or the like); returns the pipe's end that
        reads as closed once it ticked, and what `starter` returned."""
        ready, write = os.pipe()
        try:
            return ready, starter(self.command(write), stdin=subprocess.DEVNULL, pass_fds=(write,))
        finally:
            os.close(write)

    def blocking(self, job: int, attempt: int) -> None:
        """Work in a thread: sleeps, then leaves its mark (its side effect)."""
        time.sleep(self.seconds)
        journal(self.journal, "effect", job, attempt, how=self.how)


class HandsOff(Traced):
    """A coroutine that hands blocking work to a thread (`how`: to_thread or run_in_executor)
    and waits for it: a --job-timeout shorter than the work cancels the coroutine."""

    job_name = "HandsOff"

    async def handle(self) -> None:
        self.note("start")
        if self.claim.attempt == 1:
            claim = self.claim
            if self.how == "to_thread":
                await asyncio.to_thread(self.blocking, claim.id, claim.attempt)
            else:
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(None, self.blocking, claim.id, claim.attempt)
        self.note("end")


class LeavesProcess(Traced):
    """A plain job whose first attempt starts a process (a child, or with `how` daemon one
    that leaves it), then raises without waiting for it; with `how` hold, not before it has
    worked beside its process for `seconds`."""

    job_name = "LeavesProcess"

    def handle(self) -> None:
        self.note("start")
        if self.claim.attempt == 1:
            ready, _ = self.start(subprocess.Popen)
            os.read(ready, 1)
            if self.how == "hold":
                time.sleep(self.seconds)
            raise RuntimeError("failed, its process left running")
        self.note("end")


class LeavesProcessAsync(Traced):
    """LeavesProcess as a coroutine: the process started with asyncio's subprocess API
    (`how` asyncio) or from a thread it hands the start to (`how` to_thread)."""

    job_name = "LeavesProcessAsync"

    async def handle(self) -> None:
        self.note("start")
        if self.claim.attempt == 1:
            if self.how == "asyncio":
                ready, write = os.pipe()
                try:
                    command = self.command(write)
                    await asyncio.create_subprocess_exec(
                        *command, stdin=subprocess.DEVNULL, pass_fds=(write,)
                    )
                finally:
                    os.close(write)
            else:
                ready, _ = await asyncio.to_thread(self.start, subprocess.Popen)
            await asyncio.to_thread(os.read, ready, 1)
            raise RuntimeError("failed, its process left running")
        self.note("end")


class OneAtATime(Traced):
    """At most one attempt of this class runs at once; each starts a process that works
    `seconds`, and completes without waiting for it."""

    job_name = "OneAtATime"
    type = "one-at-a-time"
    concurrency = jobq.Concurrency(1)

    def handle(self) -> None:
        self.note("start")
        ready, _ = self.start(subprocess.Popen)
        os.read(ready, 1)
        self.note("end")


class FailsNearTimeout(Traced):
    """A coroutine whose first attempt fails on its own after `seconds`, about when
    --job-timeout would stop it; its retry completes at once."""

    job_name = "FailsNearTimeout"

    async def handle(self) -> None:
        self.note("start")
        if self.claim.attempt == 1:
            await asyncio.sleep(self.seconds)
            raise RuntimeError("failed on its own")
        self.note("end")


def main() -> None:
    path, job, attempt, seconds, ready = sys.argv[1:6]
    started: int | None = int(ready)
    if sys.argv[6:] == ["daemon"]:
        if os.fork() > 0:
            return
        os.setsid()
        if os.fork() > 0:
            os._exit(0)
    deadline = time.monotonic() + float(seconds)
    while time.monotonic() < deadline:
        journal(path, "tick", int(job), int(attempt), process=True)
        if started is not None:
            os.close(started)
            started = None
        time.sleep(TICK)
    journal(path, "end", int(job), int(attempt), process=True)


if __name__ == "__main__":
    main()
