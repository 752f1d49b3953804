"""Hooks an application declares in its own module, run by jobq's worker processes.

    import jobq

    @jobq.on_worker_start
    def warm_up() -> None:
        ...  # after the fork and the application's import, before the first job

    @jobq.before_job
    def fresh_connections(claim: jobq.ClaimedJob) -> None:
        ...  # just before handle(); raising fails the attempt

    @jobq.after_job
    def tidy_up(claim: jobq.ClaimedJob, outcome: jobq.Outcome) -> None:
        ...  # once the attempt's outcome is recorded; an error is logged, nothing more

They run in jobq-supervise's workers and `jobq work`, not in process_jobs() or run() that an
application calls itself. A worker with no before or after hook never looks at them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import JobqError

if TYPE_CHECKING:
    from .records import ClaimedJob, Outcome

log = logging.getLogger("jobq")

WorkerStartHook = Callable[[], object]
BeforeJobHook = Callable[["ClaimedJob"], object]
AfterJobHook = Callable[["ClaimedJob", "Outcome"], object]
H = TypeVar("H", bound=Callable[..., object])
W = TypeVar("W", bound=WorkerStartHook)
B = TypeVar("B", bound=BeforeJobHook)
A = TypeVar("A", bound=AfterJobHook)


class HookFailed(JobqError):
    """A before_job hook raised: the attempt is failed with this, its cause chained."""


def name_of(hook: Callable[..., object]) -> str:
    return f"{getattr(hook, '__module__', '?')}.{getattr(hook, '__qualname__', repr(hook))}"


@dataclass
class JobHooks:
    worker_start: list[WorkerStartHook] = field(default_factory=list)
    before: list[BeforeJobHook] = field(default_factory=list)
    after: list[AfterJobHook] = field(default_factory=list)

    def before_job(self, claim: ClaimedJob) -> None:
        for hook in self.before:
            try:
                hook(claim)
            except Exception as error:
                raise HookFailed(f"before_job hook {name_of(hook)} raised {error!r}") from error

    def after_job(self, claim: ClaimedJob, outcome: Outcome) -> None:
        for hook in self.after:
            try:
                hook(claim, outcome)
            except Exception:
                log.exception(
                    "after_job hook %s raised",
                    name_of(hook),
                    extra={"event": "hook_failed", "job_id": claim.id, "job_type": claim.type},
                )


REGISTERED = JobHooks()


def register(hooks: list[Any], hook: H, kind: str) -> H:
    if not callable(hook):
        raise TypeError(f"@jobq.{kind} decorates a function, got {hook!r}")
    hooks.append(hook)
    return hook


def on_worker_start(hook: W) -> W:
    """Run `hook()` in each worker once it has imported the application, before any job."""
    return register(REGISTERED.worker_start, hook, "on_worker_start")


def before_job(hook: B) -> B:
    """Run `hook(claim)` before each job's handle(); if it raises, the attempt fails."""
    return register(REGISTERED.before, hook, "before_job")


def after_job(hook: A) -> A:
    """Run `hook(claim, outcome)` after each attempt, once its outcome is recorded."""
    return register(REGISTERED.after, hook, "after_job")


def worker_started() -> None:
    """Run the on_worker_start hooks; an error propagates: the worker cannot start."""
    for hook in REGISTERED.worker_start:
        hook()


def for_jobs() -> JobHooks | None:
    """The hooks a worker's Queue should run around each job; None when there are none, so
    the job loop pays nothing for them."""
    return REGISTERED if REGISTERED.before or REGISTERED.after else None
