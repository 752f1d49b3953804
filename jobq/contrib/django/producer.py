"""Enqueueing from Django code, on Django's own connection."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections, transaction

from ...hooks import JobHooks
from ...job import Job
from ...queue import Queue
from . import settings

T = TypeVar("T")

# A Queue per thread and alias, reused while Django keeps the same driver connection:
# making one costs a query on MySQL (the binary log check).
local = threading.local()
# What the attempts a queue made here runs itself (process_jobs()) are followed by: the
# Tasks backend's task_finished (see apps.py), as in jobq's workers; not the application's
# own hooks, which run in jobq's workers only.
HOOKS = JobHooks()


def queue_for(alias: str | None = None) -> Queue:
    """A Queue on Django's connection for `alias` (default: JOBQ["DATABASE"]), connected if
    it was not. Django owns the connection: the queue never closes it."""
    name = alias or settings.alias()
    wrapper = connections[name]
    wrapper.ensure_connection()
    cached: dict[str, tuple[Any, Queue]] = local.__dict__.setdefault("queues", {})
    held = cached.get(name)
    if held is None or held[0] is not wrapper.connection:
        queue = Queue.from_connection(wrapper)
        queue.hooks = HOOKS if HOOKS.after else None
        held = (wrapper.connection, queue)
        cached[name] = held
    return held[1]


def enqueue(
    job: Job, *, on_commit: bool = False, using: str = DEFAULT_DB_ALIAS, **options: Any
) -> int | None:
    """Store a job on jobq's database (JOBQ["DATABASE"]) through Django's connection; the
    other keyword arguments are Queue.enqueue's.

    By default the row is written at once, on the connection of the transaction in progress
    (if any) of that alias: a rollback, or a rolled-back savepoint, drops the job with the
    rest. Returns the job's id.

    With on_commit=True the job is written only once the transaction on `using` commits
    (never if it rolls back), for when jobq's tables are in another database than the one the
    transaction writes to. Returns None: the id does not exist yet.
    """
    if not on_commit:
        return written(job, options)
    transaction.on_commit(lambda: written(job, options), using=using)
    return None


def emit(
    key: str, payload: Any = None, *, on_commit: bool = False, using: str = DEFAULT_DB_ALIAS
) -> bool | None:
    """Emit the event `key` (Queue.emit: the first emit of a key wins) for the jobs that
    wait or will wait for it (jobq.wait_for), on jobq's database through Django's
    connection.

    By default it is written at once, in the transaction in progress (if any): a rollback
    drops the event with the rest. Returns whether a job was waiting for it. With
    on_commit=True it is written once the transaction on `using` commits (never if it rolls
    back); returns None."""
    if not on_commit:
        return on_django(lambda queue: queue.emit(key, payload))
    transaction.on_commit(lambda: on_django(lambda queue: queue.emit(key, payload)), using=using)
    return None


def written(job: Job, options: dict[str, Any], alias: str | None = None) -> int:
    """Enqueue on Django's connection for `alias` (default: JOBQ["DATABASE"])."""
    return on_django(lambda queue: queue.enqueue(job, **options), alias)


def on_django(write: Callable[[Queue], T], alias: str | None = None) -> T:
    """A write on Django's connection for `alias` (default: JOBQ["DATABASE"]), a database
    error raised as Django raises its own: a deadlock or lock timeout is
    django.db.OperationalError, for the application's retry logic to catch, and Django knows
    its connection saw an error. jobq never reruns it: the transaction it aborted is the
    application's (see the README's Transactions section)."""
    name = alias or settings.alias()
    with connections[name].wrap_database_errors:
        return write(queue_for(name))
