"""The Django app: imports every installed app's `jobs` module (and, with a JobqBackend in
TASKS, its `tasks` module: a worker runs only the tasks defined there or by --app) and
installs the per-job connection hygiene, in every process that sets Django up."""

from __future__ import annotations

from importlib import import_module

from django.apps import AppConfig
from django.conf import settings
from django.db import close_old_connections
from django.utils.module_loading import autodiscover_modules

from ... import hooks
from ...records import ClaimedJob, Outcome


def before(claim: ClaimedJob) -> None:
    # As Django does around each request: a connection the database (or a restart) ended,
    # or one past CONN_MAX_AGE, is closed, and the job's first query opens a fresh one.
    close_old_connections()


def after(claim: ClaimedJob, outcome: Outcome) -> None:
    close_old_connections()


TASKS_BACKEND = "jobq.contrib.django.tasks.JobqBackend"


class JobqConfig(AppConfig):
    name = "jobq.contrib.django"
    label = "jobq"
    verbose_name = "jobq"

    def ready(self) -> None:
        autodiscover_modules("jobs")
        tasks = getattr(settings, "TASKS", {})
        if any(b.get("BACKEND") == TASKS_BACKEND for b in tasks.values()):
            import_module(TASKS_BACKEND.rpartition(".")[0])  # its job class, for the workers
            autodiscover_modules("tasks")  # the tasks a worker may run
        # Registered once, however often ready() runs (it can, in tests).
        if before not in hooks.REGISTERED.before:
            hooks.before_job(before)
            hooks.after_job(after)
