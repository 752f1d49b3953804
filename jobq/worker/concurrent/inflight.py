"""A concurrent worker's attempts in flight: one object per attempt, keyed by its token.

An attempt is in flight from its claim until its outcome is recorded. Its object holds
everything the worker knows of it: the claim, the fence row it holds, the handle that
cancels its coroutine, the stop the master asked for, the work it handed to the worker's
threads and the processes it started. Before this was one object it was four dicts keyed
by job id, and a stop that came after its attempt had ended stayed behind to fail the job's
next attempt in the same worker. A stop names its attempt's token now: once the attempt's
code is done, or its outcome recorded, the stop finds nothing to do and is dropped.

Which attempt the running code belongs to is a context variable, CURRENT: set in the
attempt's task, it follows the attempt into its thread (the thread runs in a copy of the
task's context), into asyncio.to_thread, and into the work the worker's own executor runs
for it (handoff.py).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from ...records import ClaimedJob, Outcome
from ..attempt import read_proc, running
from ..fence import Slot

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(eq=False)
class Attempt:
    claim: ClaimedJob
    row: Slot  # its fence row, held until its code and what it started have stopped
    # Its coroutine's task while that can be cancelled alone; None for a thread attempt, and
    # once its code is done.
    task: asyncio.Task[None] | None = None
    stop: str | None = None  # what the master asked it to stop with
    # Work it handed to the worker's threads that has not ended.
    handed: set[Future[Any]] = field(default_factory=set)
    spawned: bool = False  # it started a process (handoff.heard)
    # It started a process on the event loop's thread other than through asyncio's
    # subprocess API: whose it is cannot be told from the process.
    unattributed: bool = False
    pids: set[int] = field(default_factory=set)  # processes known to be its
    # Set once its code and all it started have stopped: its outcome, once recorded (None:
    # it could not be).
    outcome: asyncio.Future[Outcome | None] | None = None

    @property
    def token(self) -> str:
        return self.claim.token

    @property
    def done(self) -> bool:
        """Its code and all it started have stopped: a stop has nothing left to stop."""
        return self.outcome is not None

    def handing_off(self, work: Future[Any]) -> None:
        self.handed.add(work)
        work.add_done_callback(self.handed.discard)

    async def handed_work_ended(self) -> None:
        """Wait until no work it handed to the worker's threads runs: a thread cannot be
        stopped, so the attempt has not ended while one runs for it."""
        while pending := [work for work in list(self.handed) if not work.done()]:
            await asyncio.wait([asyncio.wrap_future(work) for work in pending])


# The attempt whose code runs here, in a task or a thread.
CURRENT: ContextVar[Attempt | None] = ContextVar("jobq_attempt", default=None)


def thread_children(native_id: int) -> set[int]:
    """The running processes that thread `native_id` of this process started and that have
    not left it: a thread's own children, as Linux keeps them apart."""
    try:
        listed = read_proc(f"/proc/self/task/{native_id}/children")
    except FileNotFoundError:
        return set()
    return {pid for pid in map(int, listed.split()) if running(pid)}


class InFlight:
    def __init__(self) -> None:
        self.attempts: dict[str, Attempt] = {}
        # The threads running an attempt's code now, by native thread id.
        self.threads: dict[int, Attempt] = {}
        self.lock = threading.Lock()

    def __iter__(self) -> Iterator[Attempt]:
        return iter(list(self.attempts.values()))

    def add(self, attempt: Attempt) -> None:
        self.attempts[attempt.token] = attempt

    def remove(self, attempt: Attempt) -> None:
        self.attempts.pop(attempt.token, None)

    def stop(self, token: str, error: str) -> Attempt | None:
        """The master stops this attempt: a coroutine is cancelled at once, and work it
        handed to a thread and that has not started never starts. A thread already running
        cannot be stopped: the master kills the whole worker after the kill grace. Dropped
        when the attempt has ended (None)."""
        attempt = self.attempts.get(token)
        if attempt is None or attempt.done:
            return None
        attempt.stop = error
        if attempt.task is not None:
            attempt.task.cancel()
        for work in list(attempt.handed):
            work.cancel()
        return attempt

    def running(self) -> list[ClaimedJob]:
        """The attempts whose code may still run, oldest first. Also read by the title's
        thread: list() of a dict's values copies it in one step under the GIL."""
        return [attempt.claim for attempt in list(self.attempts.values()) if not attempt.done]

    def run_for(
        self, attempt: Attempt, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run `call` in this thread as part of `attempt`: the processes this thread starts
        meanwhile are the attempt's, and so are those it leaves running when `call` returns
        (one thread runs one attempt's work at a time)."""
        native = threading.get_native_id()
        token = CURRENT.set(attempt)
        self.threads[native] = attempt
        try:
            return call(*args, **kwargs)
        finally:
            CURRENT.reset(token)
            if attempt.spawned:
                self.keep(attempt, thread_children(native))
            del self.threads[native]

    def keep(self, attempt: Attempt, pids: set[int]) -> None:
        """These processes are the attempt's, but any an earlier attempt left in the same
        thread, known to be that one's."""
        with self.lock:
            others = set().union(*(each.pids for each in self if each is not attempt))
            attempt.pids |= pids - others

    def owners(self) -> dict[int, Attempt]:
        """Every process known to be an attempt's, now: those recorded, and the children of
        the threads running attempts' code."""
        owned = {pid: attempt for attempt in self for pid in attempt.pids}
        for native, attempt in list(self.threads.items()):
            for pid in thread_children(native):
                owned.setdefault(pid, attempt)
        return owned

    def others_spawned(self, attempt: Attempt) -> bool:
        return any(each.spawned for each in self if each is not attempt)
