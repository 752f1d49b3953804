"""A Django task as jobq runs it: the job that JobqBackend stores, which finds the task's
function by its module path among the tasks the application defines and calls it, as
Django's own backends do, after task_started; task_finished follows once the attempt's
outcome is recorded (an after_job hook: tasks.send_task_finished). A plain function runs as a
plain job; an `async def` one as a coroutine job, on the worker's event loop under
--concurrency (and on an event loop of its own for the attempt in a worker that runs one
attempt at a time).

A task's module path is never imported: the row that names it may have been written by
anyone with INSERT rights on jobq's table, and importing a module runs its code. As JsonCodec
builds only registered Job classes, a worker runs only the tasks its application defined
with @task on a JobqBackend, which registers each as it validates it (every installed app's
`tasks` module is imported as Django starts, as its `jobs` module is)."""

from __future__ import annotations

from typing import Any, Protocol, cast

from asgiref.sync import sync_to_async
from django.db import close_old_connections

from ...errors import DecodeError
from ...job import Job
from ...queue.running import current_claim
from ...records import ClaimedJob
from .task_api import (
    Task,
    TaskContext,
    TaskResult,
    normalize_json,
    task_backends,
    task_started,
)


class StartedResults(Protocol):
    """JobqBackend, the backend that stores task jobs: the result of an attempt as it starts,
    whether or not its worker claimed it with others (see JobqBackend.started_result)."""

    def started_result(self, claim: ClaimedJob) -> TaskResult[Any, Any]: ...


# The tasks this process's application defines, by module path.
DEFINED: dict[str, Task[Any, Any]] = {}


def define(task: Task[Any, Any]) -> None:
    """Called as a JobqBackend validates a task: its @task, or a .using() copy of it."""
    DEFINED.setdefault(task.module_path, task)


def defined(module_path: str) -> Task[Any, Any]:
    """The task the application defined at this module path; DecodeError for any other."""
    task = DEFINED.get(module_path)
    if task is None:
        raise DecodeError(
            f"unknown task {module_path!r}: no @task on a JobqBackend defines it in this "
            "process (define it in an installed app's tasks module, or in a module --app "
            "imports)"
        )
    return task


class TaskJob(Job):
    """A task whose function is a plain `def`."""

    job_name = "jobq.contrib.django.tasks.TaskJob"
    # What the enqueue asked for and when it was made, as ISO 8601 (the result reads them
    # back); None in the payloads of jobs stored before they were kept.
    run_after: str | None = None
    enqueued_at: str | None = None

    def __init__(
        self,
        module_path: str,
        args: list[Any],
        kwargs: dict[str, Any],
        backend: str,
        run_after: str | None = None,
        enqueued_at: str | None = None,
    ):
        self.module_path = module_path
        self.args = args
        self.kwargs = kwargs
        self.backend = backend
        self.run_after = run_after
        self.enqueued_at = enqueued_at

    def handle(self) -> Any:
        task, args = self.started()
        # Task.call: a coroutine function stored as a plain job still runs to its end.
        return normalize_json(task.call(*args, **self.kwargs))

    def started(self) -> tuple[Task[Any, Any], list[Any]]:
        """Send task_started with this attempt's result (RUNNING, this attempt counted); the
        task, and its arguments, led by its TaskContext if it takes one."""
        task = defined(self.module_path)
        backend = cast(StartedResults, task_backends[self.backend])
        result = backend.started_result(self.claim())
        task_started.send(type(backend), task_result=result)
        context: list[Any] = [TaskContext(task_result=result)] if task.takes_context else []
        return task, [*context, *self.args]

    @staticmethod
    def claim() -> ClaimedJob:
        claim = current_claim()
        assert claim is not None, "a task's job runs only in a jobq worker"
        return claim


class AsyncTaskJob(TaskJob):
    """A task whose function is `async def`: a coroutine job. Reading its result and sending
    the signals use the ORM, so they run in sync_to_async's thread, as in any async code."""

    job_name = "jobq.contrib.django.tasks.AsyncTaskJob"

    async def handle(self) -> Any:
        task, args = await sync_to_async(self.started_in_thread)()
        try:
            return normalize_json(await task.acall(*args, **self.kwargs))
        finally:
            await sync_to_async(close_old_connections)()

    # The ORM calls of async code run in sync_to_async's thread, whose connections jobq's
    # hooks never see (they run where the attempt runs): as Django's ASGI handler does around
    # a request, the attempt closes them there, or a connection past CONN_MAX_AGE (or to a
    # database since dropped) would stay open for the worker's life.
    def started_in_thread(self) -> tuple[Task[Any, Any], list[Any]]:
        close_old_connections()
        return self.started()


TASK_JOBS = {TaskJob.job_name, AsyncTaskJob.job_name}
