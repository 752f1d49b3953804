"""jobq's options for one task: `@task(retry=..., deadline=..., unique_key=...)`, which Django
6.1 and the django-tasks backport hand to the backend's task_class. Each one set on the task
wins over the backend's default from TASKS[alias]["OPTIONS"]."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import timedelta
from typing import Any

from ...retry import RetryPolicy
from .task_api import InvalidTask, Task

# A unique key: one text for every enqueue of the task, or made from each enqueue's arguments
# (None: that enqueue has none).
UniqueKey = str | Callable[..., str | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobqTask(Task):  # type: ignore[type-arg]
    """Django's Task with jobq's options. A task's options survive using()."""

    retry: RetryPolicy | None = None
    deadline: float | timedelta | None = None
    unique_key: UniqueKey | None = None

    def __new__(cls, *args: Any, **kwargs: Any) -> JobqTask:
        # Said here, in one line, rather than as the dataclass's "unexpected keyword argument".
        unknown = sorted(set(kwargs) - {field.name for field in fields(cls)})
        if unknown:
            raise TypeError(
                f"@task(): JobqBackend takes no option {', '.join(map(repr, unknown))}; "
                f"beside Django's own it takes {', '.join(OPTIONS)}"
            )
        return object.__new__(cls)  # not super(): slots=True made this class anew


OPTIONS = ("retry", "deadline", "unique_key")


def check_options(task: JobqTask) -> None:
    """The options' types, checked when the task is defined (InvalidTask, as Django checks
    the rest of a task)."""
    if task.retry is not None and not isinstance(task.retry, RetryPolicy):
        raise InvalidTask(f"retry must be a jobq.RetryPolicy, got {task.retry!r}")
    deadline = task.deadline
    if deadline is not None and (
        isinstance(deadline, bool) or not isinstance(deadline, int | float | timedelta)
    ):
        raise InvalidTask(f"deadline must be seconds or a timedelta, got {deadline!r}")
    key = task.unique_key
    if key is not None and not (isinstance(key, str) or callable(key)):
        raise InvalidTask(
            f"unique_key must be a str or a function of the task's arguments, got {key!r}"
        )


def options_of(
    task: Task[Any, Any], args: Any, kwargs: Any
) -> tuple[RetryPolicy | None, float | timedelta | None, str | None]:
    """The task's own retry, deadline and unique key for an enqueue with these arguments;
    None for each it leaves to the backend (all of them, for a plain Task: one made without
    the backend's task_class, as on Django 6.0).

    The key is the task's own: stored after its module path, so that another task's job
    holding the same text never answers this task's enqueue (its result would be another
    task's). A key that is no text goes on as it is, for jobq's check to refuse."""
    if not isinstance(task, JobqTask):
        return None, None, None
    key = task.unique_key
    if callable(key):
        key = key(*args, **kwargs)
    if isinstance(key, str) and key:
        key = f"{task.module_path}:{key}"
    return task.retry, task.deadline, key
