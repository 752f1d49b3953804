"""Django Tasks run by jobq (TASKS in the settings names JobqBackend)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

try:
    from django.tasks import TaskContext, task
    from django.tasks.signals import task_enqueued, task_finished, task_started
except ImportError:
    from django_tasks import TaskContext, task
    from django_tasks.signals import task_enqueued, task_finished, task_started

import jobq
from jobq.contrib.django import queue_for
from jobq.contrib.django.tasks import TaskResultDoesNotExist

from .models import Order


@task(queue_name="tasks", priority=10)
def add(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


@task(queue_name="tasks")
def pause(seconds: float) -> float:
    """Works a while: long enough that a batch of them is acknowledged with each one's own
    start and end (jobq's ACK_PRECISION)."""
    time.sleep(seconds)
    return seconds


@task(queue_name="tasks")
def fails(message: str) -> None:
    raise ValueError(message)


@task(queue_name="tasks", takes_context=True)
def flaky(context: TaskContext) -> int:
    if context.attempt == 1:
        raise RuntimeError("first attempt fails")
    return context.attempt


@task(queue_name="tasks", takes_context=True)
async def later(context: TaskContext, value: str) -> dict[str, Any]:
    await asyncio.sleep(0)
    if context.attempt == 1:
        raise RuntimeError("first attempt fails")
    # On the worker's event loop, in its main thread (a plain job would run in another).
    return {"value": value.upper(), "thread": threading.current_thread().name}


@task(queue_name="tasks")
def ordered(number: int) -> None:
    Order.objects.create(number=number, receipt="ordered")


@task(queue_name="tasks")
async def ordered_async(number: int) -> None:
    await Order.objects.acreate(number=number, receipt="ordered")


@task(queue_name="tasks")
def stepped(number: int) -> dict[str, Any]:
    """Durable steps in a task: an order made once, however often the task runs again, and
    a durable sleep between (an operator's `jobq wake` ends it)."""

    def make() -> dict[str, Any]:
        pk = Order.objects.create(number=number, receipt="stepped").pk
        return {"order": pk, "key": jobq.step_key()}

    made = jobq.step("order", make)
    jobq.sleep(3600)
    return made


def receipt_key(order_id: int) -> str:
    return f"receipt-{order_id}"


# jobq's own options, through JobqBackend's task_class.
@task(
    queue_name="tasks",
    retry=jobq.RetryPolicy(max_attempts=1),
    deadline=timedelta(hours=1),
    unique_key=receipt_key,
)
def receipt(order_id: int) -> None:
    pass


# Another task whose keys are made the same way: each task's keys are its own.
@task(queue_name="tasks", unique_key=receipt_key)
def invoice(order_id: int) -> None:
    pass


def noted(name: str) -> Any:
    def receiver(sender: Any, task_result: Any, **kwargs: Any) -> None:
        Order.objects.create(number=0, receipt=f"{name} {task_result.id} {task_result.status}")

    return receiver


for _name, _signal in (
    ("enqueued", task_enqueued),
    ("started", task_started),
    ("finished", task_finished),
):
    _signal.connect(noted(_name), weak=False)


def enqueue_all() -> dict[str, str]:
    """The ids of the tasks enqueued, by name."""
    ids = {
        "add": add.enqueue(2, b=3).id,
        "fails": fails.enqueue("bad input").id,
        "flaky": flaky.enqueue().id,
        "later": later.enqueue("quiet").id,
        "tomorrow": add.using(run_after=timezone.now() + timedelta(days=1)).enqueue(0, 0).id,
    }
    try:
        with transaction.atomic():
            ids["rolled_back"] = add.enqueue(1, 1).id
            raise LookupError
    except LookupError:
        pass
    return ids


def report(ids: dict[str, str]) -> None:
    """Prints each task's result as JSON; a missing one as null."""
    out: dict[str, Any] = {}
    for name, result_id in ids.items():
        try:
            r = add.get_backend().get_result(result_id)
        except TaskResultDoesNotExist:
            out[name] = None
            continue
        out[name] = {
            "status": str(r.status),
            "return_value": r.return_value if r.status == "SUCCESSFUL" else None,
            "errors": [[e.exception_class_path, e.traceback] for e in r.errors],
            "attempts": r.attempts,
            "worker_ids": r.worker_ids,
            "args": r.args,
            "kwargs": r.kwargs,
            "queue": r.task.queue_name,
            "priority": r.task.priority,
            "started": r.started_at is not None,
            "finished": r.finished_at is not None,
            "deferred": r.task.run_after is not None,
            "class": queue_for().get(int(result_id)).class_name,  # type: ignore[union-attr]
        }
    print(json.dumps(out))


def notes() -> None:
    """Prints what the signal receivers noted, as JSON."""
    print(json.dumps(list(Order.objects.exclude(receipt="").values_list("receipt", flat=True))))


def monitored(ids: list[str]) -> None:
    """Prints, as JSON, what django-tasks-monitor recorded of each task result, by id."""
    from tasks_monitor.models import TaskRecord

    records = TaskRecord.objects.filter(result_id__in=ids)
    print(
        json.dumps(
            {
                r.result_id: {
                    "status": r.status,
                    "finished": r.finished_at is not None,
                    "attempts": r.attempts,
                    "exception_class": r.exception_class,
                    "traceback": r.traceback,
                }
                for r in records
            }
        )
    )
