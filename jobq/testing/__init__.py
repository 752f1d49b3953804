"""Tools for testing systems built on jobq: a throwaway queue, assertions on what was
enqueued, running jobs in the test's process (drain, perform), an attempt journal, a history
checker, and a job that journals its attempts. The pytest plugin (plugin.py, registered by an
entry point) gives the jobq_queue and jobq_async_queue fixtures."""

from .assertions import assert_enqueued, enqueued, refute_enqueued
from .draining import Drained, JobSuspended, drain, perform
from .queues import async_queue, queue

__all__ = [
    "Drained",
    "JobSuspended",
    "assert_enqueued",
    "async_queue",
    "drain",
    "enqueued",
    "perform",
    "queue",
    "refute_enqueued",
]
