"""Django's Tasks framework on jobq: TASKS = {"default": {"BACKEND":
"jobq.contrib.django.tasks.JobqBackend"}}. Works with Django 6's django.tasks and with the
django-tasks backport package on older Django (the same API under another name)."""

from __future__ import annotations

from inspect import iscoroutinefunction
from typing import Any, cast

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from ...records import JobRecord, Status
from ...retry import RetryPolicy
from . import producer
from .task_api import (
    BaseTaskBackend,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    normalize_json,
    task_enqueued,
)
from .task_checks import setting_errors
from .task_jobs import TASK_JOBS, AsyncTaskJob, TaskJob, define, defined
from .task_options import JobqTask, check_options, options_of

__all__ = ["AsyncTaskJob", "JobqBackend", "JobqTask", "TaskJob", "TaskResultDoesNotExist"]

# Django says how a task's run ended; jobq's row says more (expired, cancelled): both failed.
STATUSES = {
    Status.PENDING: TaskResultStatus.READY,
    # Django has no word for a task that waits for others: it has not run yet.
    Status.WAITING: TaskResultStatus.READY,
    Status.IN_PROGRESS: TaskResultStatus.RUNNING,
    Status.COMPLETED: TaskResultStatus.SUCCESSFUL,
}


class JobqBackend(BaseTaskBackend):  # type: ignore[misc, unused-ignore]
    """Stores each task as a jobq job on Django's connection (so an enqueue inside
    transaction.atomic() is rolled back with it); queue_name is the job's type."""

    supports_defer = True
    supports_get_result = True
    supports_priority = True
    supports_async_task = True
    task_class = JobqTask

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

    def validate_task(self, task: Task[Any, Any]) -> None:
        super().validate_task(task)
        if isinstance(task, JobqTask):
            check_options(task)
        define(task)

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        return [*super().check(**kwargs), *setting_errors(self.alias, self.database, self.queues)]

    def enqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any, Any]:
        self.validate_task(task)
        # Stored as Django would hand them back: tuples as lists, lazy strings as str.
        normal_args = cast(list[Any], normalize_json(list(args)))
        normal_kwargs = cast(dict[str, Any], normalize_json(dict(kwargs)))
        job_class = AsyncTaskJob if iscoroutinefunction(task.func) else TaskJob
        job = job_class(task.module_path, normal_args, normal_kwargs, self.alias)
        retry, deadline, unique_key = options_of(task, args, kwargs)
        options = {
            "type": task.queue_name,
            "priority": task.priority,
            "scheduled_at": task.run_after,
            "retry": retry or self.retry,
            "deadline": self.deadline if deadline is None else deadline,
            "unique_key": unique_key,
        }
        # A lock wait (another transaction holds the unique key) ends as Django's error.
        job_id = producer.written(job, options, self.database)
        result = self.get_result(str(job_id))
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult[Any, Any]:
        try:
            record = producer.queue_for(self.database).get(int(result_id))
        except ValueError:
            record = None
        if record is None or record.class_name not in TASK_JOBS:
            raise TaskResultDoesNotExist(result_id)
        return self.result_of(record)

    def result_of(self, record: JobRecord) -> TaskResult[Any, Any]:
        payload = producer.queue_for(self.database).codec.decode(record.class_name, record.payload)
        assert isinstance(payload, TaskJob)
        task = defined(payload.module_path)
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
