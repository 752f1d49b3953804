"""What a coroutine attempt hands to threads and processes, traced back to its attempt.

A coroutine that is cancelled stops at its next `await`; a thread it handed work to
(`asyncio.to_thread`, `loop.run_in_executor(None, ...)`, asgiref's `sync_to_async`, which
Django's async ORM uses) does not, and neither does a process it started. So that an attempt
ends only when all it started has stopped, the worker's event loop and executors keep count:

- HandOff is the loop's default executor, and asgiref's single thread when the application
  loaded asgiref: each piece of work submitted from an attempt's code is the attempt's until it
  returns (inflight.Attempt.handed), and runs as the attempt (InFlight.run_for);
- AttemptLoop records the pid of every process an attempt starts with asyncio's subprocess
  API (`asyncio.create_subprocess_exec` and `_shell`);
- heard(), an audit hook, notes each attempt that starts a process at all, and one that starts
  it on the loop's thread some other way (`subprocess.run` inside a coroutine), whose process
  cannot be told apart from its siblings' (see leftovers.py).

An executor the job creates itself is out of sight: work it runs is not waited for, and a
process it starts is found only if it outlives its parent (docs/guides/concurrency.md).
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import ContextVar
from functools import partial
from typing import Any, ParamSpec, TypeVar

from .inflight import CURRENT, InFlight

P = ParamSpec("P")
T = TypeVar("T")

# The audit events of starting a process (os.spawn* and os.popen go through these).
SPAWNS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.system"})

# Set while asyncio's subprocess API starts a process for the task: its pid is recorded.
BY_ASYNCIO: ContextVar[bool] = ContextVar("jobq_by_asyncio", default=False)


class HandOff(ThreadPoolExecutor):
    """An executor whose work, when an attempt's code submits it, is that attempt's."""

    def __init__(self, inflight: InFlight, threads: int, name: str) -> None:
        super().__init__(threads, thread_name_prefix=name)
        self.inflight = inflight

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        attempt = CURRENT.get()
        if attempt is None:
            return super().submit(fn, *args, **kwargs)
        work = super().submit(partial(self.inflight.run_for, attempt, fn, *args, **kwargs))
        attempt.handing_off(work)
        return work


class AttemptLoop(asyncio.SelectorEventLoop):
    """The worker's event loop: records the processes attempts start through asyncio."""

    async def subprocess_exec(self, *args: Any, **kwargs: Any) -> Any:
        return self.recorded(await self.started(super().subprocess_exec, *args, **kwargs))

    async def subprocess_shell(self, *args: Any, **kwargs: Any) -> Any:
        return self.recorded(await self.started(super().subprocess_shell, *args, **kwargs))

    @staticmethod
    async def started(start: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        token = BY_ASYNCIO.set(True)
        try:
            return await start(*args, **kwargs)
        finally:
            BY_ASYNCIO.reset(token)

    @staticmethod
    def recorded(started: tuple[asyncio.SubprocessTransport, Any]) -> Any:
        attempt = CURRENT.get()
        pid = started[0].get_pid()
        if attempt is not None and pid is not None:
            attempt.pids.add(pid)
        return started


def listen(loop_thread: int) -> None:
    """Note, from now on, which attempts start processes (`loop_thread`: the event loop's
    thread's native id). An audit hook cannot be removed: the worker installs it once, and
    it costs a set lookup per audit event."""

    def heard(event: str, args: tuple[object, ...]) -> None:
        if event not in SPAWNS:
            return
        attempt = CURRENT.get()
        if attempt is None:
            return
        attempt.spawned = True
        if threading.get_native_id() == loop_thread and not BY_ASYNCIO.get():
            attempt.unattributed = True

    sys.addaudithook(heard)


def track_asgiref(inflight: InFlight) -> HandOff | None:
    """Run asgiref's thread-sensitive `sync_to_async` work (Django's async ORM) in a HandOff of
    one thread, as asgiref's own single thread does, if the application loaded asgiref."""
    sync = sys.modules.get("asgiref.sync")
    if sync is None:
        return None
    single = HandOff(inflight, 1, "jobq-sync-to-async")
    sync.SyncToAsync.single_thread_executor = single
    return single
