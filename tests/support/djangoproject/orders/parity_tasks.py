"""Tasks for test_backend_parity.py, written to exercise what Django's ImmediateBackend
promises: no queue_name of their own, so either backend takes them as they are."""

from __future__ import annotations

import asyncio
from typing import Any

try:
    from django.tasks import TaskContext, task
except ImportError:
    from django_tasks import TaskContext, task


@task
def nothing(*args: Any, **kwargs: Any) -> None:
    pass


@task
async def nothing_async(*args: Any, **kwargs: Any) -> None:
    await asyncio.sleep(0)


@task
def answer() -> int:
    return 42


@task
def refuses(message: str) -> None:
    raise ValueError(message)


@task
def exits(message: str) -> None:
    raise SystemExit(message)


@task
def wrapped() -> None:
    raise ValueError(ValueError("the inner one"))


@task
def unstorable() -> object:
    return {"set": {1, 2}}  # no JSON for a set


@task(takes_context=True)
def own_id(context: TaskContext) -> str:
    return str(context.task_result.id)
