"""jobq: a job queue that lives in your own PostgreSQL, MySQL/MariaDB or SQLite database."""

from .codec import Codec, JsonCodec
from .errors import (
    ConfigurationError,
    DecodeError,
    DuplicateStep,
    EventTimeout,
    GatherFailed,
    JobqError,
    StepRefused,
)
from .hooks import HookFailed, after_job, before_job, on_worker_start
from .job import Job
from .limits import Concurrency, Rate
from .listener import Listener
from .queue import Queue
from .queue.asynchronous import AsyncQueue
from .queue.durable import astep, step, step_key
from .queue.events import wait_for
from .queue.gathering import agather, gather
from .queue.progress import checkpoint, progress
from .queue.running import cancel_requested, current_claim
from .queue.suspending import sleep, sleep_until, snooze
from .records import ClaimedJob, JobFilter, JobRecord, Outcome, Status
from .retry import RetryPolicy
from .schedules import schedule

__version__ = "0.1.0"

__all__ = [
    "AsyncQueue",
    "ClaimedJob",
    "Codec",
    "Concurrency",
    "ConfigurationError",
    "DecodeError",
    "DuplicateStep",
    "EventTimeout",
    "GatherFailed",
    "HookFailed",
    "Job",
    "JobFilter",
    "JobRecord",
    "JobqError",
    "JsonCodec",
    "Listener",
    "Outcome",
    "Queue",
    "Rate",
    "RetryPolicy",
    "Status",
    "StepRefused",
    "__version__",
    "after_job",
    "agather",
    "astep",
    "before_job",
    "cancel_requested",
    "checkpoint",
    "current_claim",
    "gather",
    "on_worker_start",
    "progress",
    "schedule",
    "sleep",
    "sleep_until",
    "snooze",
    "step",
    "step_key",
    "wait_for",
]
