"""Django's Tasks framework on jobq: TASKS = {"default": {"BACKEND":
"jobq.contrib.django.tasks.JobqBackend"}}. Works with Django 6's django.tasks and with the
django-tasks backport package on older Django (the same API under another name)."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
from datetime import UTC, datetime
from inspect import iscoroutinefunction
from typing import Any, cast

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.utils import timezone

from ...codec import JsonCodec
from ...job import check_type_name
from ...outcomes import unraised_class
from ...queue.controls import is_id
from ...records import ClaimedJob, JobRecord, Outcome, Status
from ...retry import RetryPolicy
from . import producer
from .task_api import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    normalize_json,
    task_backends,
    task_enqueued,
    task_finished,
)
from .task_checks import setting_errors
from .task_jobs import TASK_JOBS, AsyncTaskJob, TaskJob, define, defined
from .task_options import JobqTask, check_options, options_of

__all__ = [
    "AsyncTaskJob",
    "JobqBackend",
    "JobqTask",
    "TaskJob",
    "TaskResultDoesNotExist",
    "send_task_finished",
]

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
        try:
            check_type_name(task.queue_name)
        except ValueError as error:
            raise InvalidTask(f"queue_name is no jobq job type: {error}") from None
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
        # The time of the call, as Django's own backends give it: the row's own is the
        # transaction's start on PostgreSQL. The run_after asked for is kept as given, for
        # the result's task to read back however a retry moves the job's schedule.
        job = job_class(
            task.module_path,
            normal_args,
            normal_kwargs,
            self.alias,
            run_after=None if task.run_after is None else task.run_after.isoformat(),
            enqueued_at=datetime.now(UTC).isoformat(),
        )
        retry, deadline, unique_key = options_of(task, args, kwargs)
        options = {
            "type": task.queue_name,
            "priority": task.priority,
            "scheduled_at": aware(task.run_after),
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
        return self.result_of(self.record_of(result_id))

    def record_of(self, result_id: str) -> JobRecord:
        job_id = job_id_of(result_id)
        record = None if job_id is None else producer.queue_for(self.database).get(job_id)
        if record is None or record.class_name not in TASK_JOBS:
            raise TaskResultDoesNotExist(result_id)
        return record

    def started_result(self, claim: ClaimedJob) -> TaskResult[Any, Any]:
        """The result as the attempt `claim` starts (for task_started and the TaskContext):
        RUNNING, though an attempt that waited in its worker's queue has its start recorded
        only with its end (see jobq's prefetch guide): this one begins now, as its task does."""
        record = self.record_of(str(claim.id))
        if record.claimed_unstarted:
            began = datetime.now(UTC)
            record = dataclasses.replace(
                record, attempted_at=began, started_at=record.started_at or began
            )
        return self.result_of(record)

    def attempt_result(self, job_id: int, attempt: int, outcome: Outcome) -> TaskResult[Any, Any]:
        """The result as this attempt's recorded outcome left it, later attempts left out:
        what task_finished carries, though jobq may have started the next attempt already."""
        record = producer.queue_for(self.database).get(job_id)
        if record is None:
            raise TaskResultDoesNotExist(str(job_id))
        status = ENDED_AS.get(outcome)
        if status is not None:
            history = tuple(entry for entry in record.history if entry.attempt <= attempt)
            record = dataclasses.replace(
                record,
                status=status,
                history=history,
                attempted_at=history[-1].started_at if history else record.attempted_at,
                finished_at=None if status is Status.PENDING else record.finished_at,
            )
        return self.result_of(record)

    def result_of(self, record: JobRecord) -> TaskResult[Any, Any]:
        payload = producer.queue_for(self.database).codec.decode(record.class_name, record.payload)
        assert isinstance(payload, TaskJob)
        task: Task[Any, Any] = defined(payload.module_path)
        # The attempt under way has no history entry yet, but counts as an attempt; one claimed
        # that waits in its worker's queue has not run yet: READY, as a pending job.
        waiting = record.claimed_unstarted
        running = (
            [record.worker or ""] if record.status is Status.IN_PROGRESS and not waiting else []
        )
        last_attempt = record.history[-1].started_at if record.history else None
        result: TaskResult[Any, Any] = TaskResult(
            task=task.using(
                priority=record.priority,
                queue_name=record.type,
                backend=self.alias,
                run_after=run_after_of(payload, record),
            ),
            id=str(record.id),
            status=(
                TaskResultStatus.READY
                if waiting
                else STATUSES.get(record.status, TaskResultStatus.FAILED)
            ),
            enqueued_at=(
                record.created_at
                if payload.enqueued_at is None
                else datetime.fromisoformat(payload.enqueued_at)
            ),
            started_at=record.started_at,
            last_attempted_at=record.attempted_at or last_attempt,
            finished_at=record.finished_at,
            args=payload.args,
            kwargs=payload.kwargs,
            backend=self.alias,
            # Every failed attempt, those that raised nothing (a timeout, an expired lease, a
            # dead worker) named by a class of jobq's, with their message.
            errors=[
                TaskError(
                    exception_class_path=e.error_class or unraised_class(e.error),
                    # Ended by a newline, as Python prints one (jobq keeps it stripped).
                    traceback=e.error if e.error.endswith("\n") else f"{e.error}\n",
                )
                for e in record.history
                if e.error is not None
            ],
            worker_ids=[entry.worker or "" for entry in record.history] + running,
        )
        object.__setattr__(result, "_return_value", record.result)
        return result


# What the job's status was once an attempt's outcome was recorded; a lost attempt's
# outcome is another attempt's to tell.
ENDED_AS = {
    Outcome.COMPLETED: Status.COMPLETED,
    Outcome.RETRIED: Status.PENDING,
    Outcome.SUSPENDED: Status.PENDING,
    Outcome.FAILED: Status.FAILED,
    Outcome.EXPIRED: Status.EXPIRED,
    Outcome.CANCELLED: Status.CANCELLED,
}

# The ids jobq issues: a job id in ASCII decimal, with no sign, space or leading zero.
RESULT_ID = re.compile("[1-9][0-9]*")


def job_id_of(result_id: object) -> int | None:
    """The job id a result id names; None for any text jobq never issues as one, so that
    no lookup is made (PostgreSQL would refuse an id past 64 bits, and abort the caller's
    transaction with it)."""
    if not isinstance(result_id, str) or RESULT_ID.fullmatch(result_id) is None:
        return None
    job_id = int(result_id)
    return job_id if is_id(job_id) else None


def aware(run_after: datetime | None) -> datetime | None:
    """When to run the job: a naive run_after (which Django takes with USE_TZ = False) in
    the project's TIME_ZONE, as Django reads naive times."""
    if run_after is None or timezone.is_aware(run_after):
        return run_after
    return timezone.make_aware(run_after, timezone.get_default_timezone())


def run_after_of(payload: TaskJob, record: JobRecord) -> datetime | None:
    """The run_after the enqueue asked for, as given. A job stored before jobq kept it
    (no enqueued_at either) has only its schedule: later than its enqueue, or none."""
    if payload.enqueued_at is not None:
        return None if payload.run_after is None else datetime.fromisoformat(payload.run_after)
    return record.scheduled_at if record.scheduled_at > record.created_at else None


def send_task_finished(claim: ClaimedJob, outcome: Outcome) -> None:
    """An after_job hook: task_finished for an attempt of a task, once its outcome is
    recorded, with the result that outcome left (SUCCESSFUL, or FAILED with the attempt's
    error, or READY again when jobq retries it), as Django's own backends send it."""
    if claim.class_name not in TASK_JOBS:
        return
    job = JsonCodec().decode(claim.class_name, claim.payload)
    assert isinstance(job, TaskJob)
    backend = task_backends[job.backend]
    assert isinstance(backend, JobqBackend), f"TASKS[{job.backend!r}] is no JobqBackend"

    def send() -> None:
        result = backend.attempt_result(claim.id, claim.attempt, outcome)
        task_finished.send(type(backend), task_result=result)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        on_a_loop = False
    else:
        on_a_loop = True
    if not on_a_loop:
        # Outside the except clause: django.tasks logs a failed task with logger.exception,
        # which would otherwise print "no running event loop" as the task's traceback.
        send()
        return
    # An async task's attempt, on a worker's event loop, where Django refuses the ORM: sent
    # from a thread of its own, as sync_to_async would, whose connections end with it; what
    # it raised is raised here, for the hook's caller to log.
    raised: list[Exception] = []

    def in_thread() -> None:
        try:
            send()
        except Exception as error:
            raised.append(error)
        finally:
            connections.close_all()

    thread = threading.Thread(target=in_thread, name="jobq-task-finished")
    thread.start()
    thread.join()
    if raised:
        raise raised[0]
