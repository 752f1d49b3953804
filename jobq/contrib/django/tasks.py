"""Django's Tasks framework on jobq: TASKS = {"default": {"BACKEND":
"jobq.contrib.django.tasks.JobqBackend"}}. Works with Django 6's django.tasks and with the
django-tasks backport package on older Django (the same API under another name)."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, cast

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from ... import current_claim
from ...job import Job
from ...records import JobRecord, Status
from ...retry import RetryPolicy

# Django 6's django.tasks, else the django-tasks backport (the same API under another name).
try:
    from django.tasks import task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskContext, TaskError, TaskResult, TaskResultStatus
    from django.tasks.exceptions import TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json
except ImportError:
    from django_tasks import task_backends  # type: ignore[assignment, no-redef, attr-defined, import-untyped, unused-ignore]
    from django_tasks.backends.base import BaseTaskBackend  # type: ignore[assignment, no-redef, attr-defined, import-untyped, unused-ignore]
    from django_tasks.base import Task, TaskContext, TaskError, TaskResult, TaskResultStatus  # type: ignore[assignment, no-redef, attr-defined, import-untyped, unused-ignore]
    from django_tasks.exceptions import TaskResultDoesNotExist  # type: ignore[assignment, no-redef, attr-defined, import-untyped, unused-ignore]
    from django_tasks.signals import task_enqueued, task_finished, task_started  # type: ignore[assignment, no-redef, attr-defined, import-untyped, unused-ignore]
    from django_tasks.utils import normalize_json  # type: ignore[assignment, no-redef, attr-defined, import-untyped, unused-ignore]

from . import producer

# Django says how a task's run ended; jobq's row says more (expired, cancelled): both failed.
STATUSES = {
    Status.PENDING: TaskResultStatus.READY,
    # Django has no word for a task that waits for others: it has not run yet.
    Status.WAITING: TaskResultStatus.READY,
    Status.IN_PROGRESS: TaskResultStatus.RUNNING,
    Status.COMPLETED: TaskResultStatus.SUCCESSFUL,
}


class TaskJob(Job):
    """A Django task, run by a jobq worker: the function is found by its module path."""

    job_name = "jobq.contrib.django.tasks.TaskJob"

    def __init__(self, module_path: str, args: list[Any], kwargs: dict[str, Any], backend: str):
        self.module_path = module_path
        self.args = args
        self.kwargs = kwargs
        self.backend = backend

    def handle(self) -> Any:
        task: Task[Any, Any] = import_string(self.module_path)
        backend = JobqBackend.named(self.backend)
        claim = current_claim()
        assert claim is not None, "TaskJob runs only in a jobq worker"
        result = backend.get_result(str(claim.id))
        task_started.send(type(backend), task_result=result)
        try:
            call_args: list[Any] = list(self.args)
            if task.takes_context:
                call_args.insert(0, TaskContext(task_result=result))
            value = task.func(*call_args, **self.kwargs)
            if inspect.isawaitable(value):
                # A coroutine task runs to its end inside this job (see the guide).
                value = asyncio.run(_awaited(value))
            return normalize_json(value)
        finally:
            task_finished.send(type(backend), task_result=backend.get_result(str(claim.id)))


async def _awaited(value: Any) -> Any:
    return await value


class JobqBackend(BaseTaskBackend):  # type: ignore[misc, unused-ignore]
    """Stores each task as a jobq job on Django's connection (so an enqueue inside
    transaction.atomic() is rolled back with it); queue_name is the job's type."""

    supports_defer = True
    supports_get_result = True
    supports_priority = True
    supports_async_task = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        options = dict(params.get("OPTIONS", {}))
        self.database: str | None = options.pop("DATABASE", None)
        retry = options.pop("RETRY", None)
        self.retry = RetryPolicy(**retry) if retry is not None else None
        self.deadline: float | None = options.pop("DEADLINE", None)
        if options:
            raise ImproperlyConfigured(
                f"TASKS[{alias!r}]['OPTIONS']: unknown {sorted(options)}; "
                "JobqBackend takes DATABASE, RETRY and DEADLINE"
            )

    @staticmethod
    def named(alias: str) -> JobqBackend:
        backend = task_backends[alias]
        assert isinstance(backend, JobqBackend), f"TASKS[{alias!r}] is not a JobqBackend"
        return backend

    def enqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any, Any]:
        self.validate_task(task)
        # Stored as Django would hand them back: tuples as lists, lazy strings as str.
        normal_args = cast(list[Any], normalize_json(list(args)))
        normal_kwargs = cast(dict[str, Any], normalize_json(dict(kwargs)))
        job = TaskJob(task.module_path, normal_args, normal_kwargs, self.alias)
        job_id = producer.queue_for(self.database).enqueue(
            job,
            type=task.queue_name,
            priority=task.priority,
            scheduled_at=task.run_after,
            retry=self.retry,
            deadline=self.deadline,
        )
        result = self.get_result(str(job_id))
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult[Any, Any]:
        try:
            record = producer.queue_for(self.database).get(int(result_id))
        except ValueError:
            record = None
        if record is None or record.class_name != TaskJob.job_name:
            raise TaskResultDoesNotExist(result_id)
        return self.result_of(record)

    def result_of(self, record: JobRecord) -> TaskResult[Any, Any]:
        payload = producer.queue_for(self.database).codec.decode(record.class_name, record.payload)
        assert isinstance(payload, TaskJob)
        task: Task[Any, Any] = import_string(payload.module_path)
        failed = [entry for entry in record.history if entry.error_class is not None]
        # The attempt under way has no history entry yet, but counts as an attempt.
        running = [record.worker or ""] if record.status is Status.IN_PROGRESS else []
        result: TaskResult[Any, Any] = TaskResult(
            task=task.using(
                priority=record.priority,
                queue_name=record.type,
                backend=self.alias,
                # A task enqueued to run at once is scheduled at its enqueue time.
                run_after=record.scheduled_at if record.scheduled_at > record.created_at else None,
            ),
            id=str(record.id),
            status=STATUSES.get(record.status, TaskResultStatus.FAILED),
            enqueued_at=record.created_at,
            started_at=record.started_at,
            last_attempted_at=record.attempted_at,
            finished_at=record.finished_at,
            args=payload.args,
            kwargs=payload.kwargs,
            backend=self.alias,
            errors=[
                TaskError(exception_class_path=e.error_class or "", traceback=e.error or "")
                for e in failed
            ],
            worker_ids=[entry.worker or "" for entry in record.history] + running,
        )
        object.__setattr__(result, "_return_value", record.result)
        return result
