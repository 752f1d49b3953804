"""Durable steps: jobq.step() runs a piece of a job's handle() once per job, however often
the job runs again, by recording its value as it ends and replaying the record after.

"Once" means: a step whose record has committed never runs again; a step interrupted before
its record commits (a crash, a fence) runs again in the next attempt, with the same
step_key(). The record is written only by the attempt that holds the job and its lease
(backends/step_records.py), in one statement: an attempt that lost its job can record
nothing, and stops (StepRefused) as a job whose checkpoint() was refused should.

Each run of handle() reads the job's recorded steps once, at its first step, in one read.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar, cast, overload

from ..backends.base import Backend
from ..codec import Codec
from ..errors import DuplicateStep, StepRefused
from ..records import ClaimedJob
from ..results import decode_result, encode_step
from ..retry import RetryPolicy

log = logging.getLogger("jobq")

T = TypeVar("T")


@dataclass
class Journal:
    """One run of a job's handle(): the steps recorded before it (read at its first step),
    the names it has used, and whether a record was refused."""

    claim: ClaimedJob
    backend: Backend
    codec: Codec
    recorded: dict[str, str] | None = None
    used: set[str] = field(default_factory=set)
    lost: bool = False
    sleeps: int = 0  # jobq.sleep() calls so far, which name their steps by default
    waits: int = 0  # jobq.wait_for() calls so far, likewise
    gathers: int = 0  # jobq.gather() calls so far, likewise

    def replayed(self, name: str) -> tuple[bool, Any]:
        """Claim `name` for this run: (True, its value) when it was recorded before, else
        (False, None) and the step must run."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"a step's name must be a non-empty str, got {name!r}")
        if name in self.used:
            raise DuplicateStep(
                f"step {name!r} already ran in this run of job {self.claim.id}; give each "
                f"call a name of its own (in a loop: f'{name}-{{n}}')"
            )
        if self.lost:
            raise StepRefused(self.refusal(name))
        self.used.add(name)
        if self.recorded is None:
            self.recorded = self.backend.steps_of(self.claim.id)
        if name in self.recorded:
            return True, decode_result(self.codec, self.recorded[name])
        return False, None

    def record(self, name: str, value: Any) -> Any:
        """Record what the step returned; the value as a replay would give it back."""
        text = encode_step(self.codec, value, name)
        size = len(text.encode("utf-8", "surrogatepass"))
        claim = self.claim
        if not self.backend.record_step(claim.id, claim.token, name, text, size):
            self.lost = True
            log.warning(
                "Job %d: step %r not recorded, this attempt no longer holds the job",
                claim.id,
                name,
                extra={"event": "step_refused", "job_id": claim.id, "job_type": claim.type},
            )
            raise StepRefused(self.refusal(name))
        return decode_result(self.codec, text)

    def refusal(self, name: str) -> str:
        return (
            f"step {name!r} of job {self.claim.id} was not recorded: attempt "
            f"{self.claim.attempt} no longer holds the job (its lease ended, or another "
            "attempt has it), so it stops here"
        )


journal: ContextVar[Journal | None] = ContextVar("jobq_journal", default=None)
# The name of the step whose function is running, for step_key().
inside: ContextVar[str | None] = ContextVar("jobq_step", default=None)


def opened(what: str) -> Journal:
    current = journal.get()
    if current is None:
        raise RuntimeError(f"{what} is for a job's handle(), while it runs")
    if inside.get() is not None:
        raise RuntimeError(f"{what} cannot run inside step {inside.get()!r}: steps do not nest")
    return current


def step(
    name: str,
    fn: Callable[..., T],
    *args: Any,
    retry: RetryPolicy | None = None,
    transaction: bool = False,
    **kwargs: Any,
) -> T:
    """From inside a job's handle(): run `fn(*args, **kwargs)` as the step `name`, once per
    job. Its value is recorded (by the job's codec) as the attempt that holds the job; when
    the job runs again, the step returns its recorded value without running. A step that
    raises records nothing. `retry`: rerun it in place after an exception, with the policy's
    backoff, before giving up. `transaction`: call `fn(connection, *args, **kwargs)` with
    the job's own connection, in a transaction that commits its writes and the step's record
    together (a process worker's only). For a coroutine function, `await jobq.astep(...)`."""
    current = opened("jobq.step()")
    if inspect.iscoroutinefunction(fn):
        raise TypeError(f"step {name!r}: {fn!r} is a coroutine function; use await jobq.astep()")
    done, value = current.replayed(name)
    if done:
        return cast(T, value)
    if transaction:
        return cast(T, transacted(current, name, partial(fn, *args, **kwargs), retry))
    for attempt in tries(name, retry):
        with attempt:
            value = fn(*args, **kwargs)
    if inspect.isawaitable(value):
        raise TypeError(f"step {name!r} returned an awaitable; use await jobq.astep()")
    return cast(T, current.record(name, value))


@overload
async def astep(
    name: str,
    fn: Callable[..., Awaitable[T]],
    *args: Any,
    retry: RetryPolicy | None = None,
    **kwargs: Any,
) -> T: ...


@overload
async def astep(
    name: str, fn: Callable[..., T], *args: Any, retry: RetryPolicy | None = None, **kwargs: Any
) -> T: ...


async def astep(
    name: str,
    fn: Callable[..., Any],
    *args: Any,
    retry: RetryPolicy | None = None,
    **kwargs: Any,
) -> Any:
    """jobq.step() for an `async def handle`: `fn` may be a coroutine function or a plain
    one. The record's one short statement runs on the event loop, as checkpoint()'s does."""
    current = opened("jobq.astep()")
    done, value = current.replayed(name)
    if done:
        return value
    async for attempt in atries(name, retry):
        with attempt:
            value = fn(*args, **kwargs)
            value = (await value) if inspect.isawaitable(value) else value
    return current.record(name, value)


class Try:
    """One try of a step's function, as a frame: step_key() answers inside it, and an
    exception leaving it is kept back while the step's `retry` allows another try."""

    def __init__(self, name: str, last: bool, pause: float) -> None:
        self.name = name
        self.last = last  # no retry left after this one
        self.pause = pause  # seconds to wait after it fails
        self.succeeded = False

    def __enter__(self) -> Try:
        self.token = inside.set(self.name)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: object, trace: object) -> bool:
        inside.reset(self.token)
        self.succeeded = kind is None
        # A refused record is final: no try of this attempt's can record the step.
        kept = kind is not None and issubclass(kind, Exception) and kind is not StepRefused
        return not self.last and kept


def tries(name: str, retry: RetryPolicy | None) -> Iterator[Try]:
    """A step's tries, each after the pause the one before asked, until one succeeds."""
    for attempt in schedule(name, retry):
        yield attempt
        if attempt.succeeded:
            return
        time.sleep(attempt.pause)


async def atries(name: str, retry: RetryPolicy | None) -> AsyncIterator[Try]:
    """tries() for a coroutine job: its pauses hold no thread."""
    for attempt in schedule(name, retry):
        yield attempt
        if attempt.succeeded:
            return
        await asyncio.sleep(attempt.pause)


def schedule(name: str, retry: RetryPolicy | None) -> Iterator[Try]:
    """A step's tries in place: one without a policy, else the policy's max_attempts."""
    if retry is None:
        yield Try(name, True, 0.0)
        return
    for n in range(1, retry.max_attempts + 1):
        last = not retry.allows_another(n)
        yield Try(name, last, 0.0 if last else retry.delay_after(n))


def transacted(
    current: Journal, name: str, fn: Callable[[Any], Any], retry: RetryPolicy | None
) -> Any:
    """A step whose writes on the job's connection commit with its record, or not at all:
    each try is a transaction of its own, rolled back when it raises or the record is
    refused."""
    backend = current.backend
    if getattr(backend, "shared", False):
        raise RuntimeError(
            f"step {name!r}: transaction=True needs the job's connection to itself; under "
            "--concurrency the worker's connection serves every attempt: run such jobs on a "
            "process worker (no --concurrency), or write in a transaction of your own"
        )
    for attempt in tries(name, retry):
        with attempt, backend.transaction():
            value = current.record(name, fn(backend.connection))
    return value


def step_key() -> str:
    """From inside a step: a key that names this step of this job, the same in every
    attempt, to give an API that takes an idempotency key (a payment provider's)."""
    name, current = inside.get(), journal.get()
    if name is None or current is None:
        raise RuntimeError("jobq.step_key() is for the function a jobq.step() runs")
    return f"jobq-{current.claim.id}-{name}"
