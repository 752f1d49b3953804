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
from ...job import check_type_name, declare_types
from ...records import ClaimedJob, Outcome
from . import producer


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
        ours = [b for b in tasks.values() if b.get("BACKEND") == TASKS_BACKEND]
        if ours:
            autodiscover_modules("tasks")  # the tasks a worker may run
        # Registered once, however often ready() runs (it can, in tests).
        if before not in hooks.REGISTERED.before:
            hooks.before_job(before)
            if ours:
                # Its job class, for the workers; task_finished once an attempt is recorded,
                # in the workers and in queue_for().process_jobs(), before the connections
                # the receivers may use are closed.
                module = import_module(TASKS_BACKEND.rpartition(".")[0])
                hooks.after_job(module.send_task_finished)
                producer.HOOKS.after.append(module.send_task_finished)
            hooks.after_job(after)
        # The queues the backends serve, which their one job class takes as its type: the
        # supervisor's start line lists them. A name jobq cannot serve is the checks' to tell.
        declare_types(
            name for backend in ours for name in backend.get("QUEUES", ["default"]) if usable(name)
        )


def usable(name: object) -> bool:
    try:
        check_type_name(name)
    except ValueError:
        return False
    return True
