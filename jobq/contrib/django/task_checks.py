"""The system checks (`manage.py check`) of a JobqBackend's settings: what would otherwise
fail only at the first enqueue, or only in the workers."""

from __future__ import annotations

from collections.abc import Iterable

from django.apps import apps
from django.conf import settings
from django.core import checks

from ...job import check_type_name


def setting_errors(
    alias: str, database: str | None, queues: Iterable[object]
) -> list[checks.CheckMessage]:
    """What is wrong in TASKS[alias], whose OPTIONS name `database` and which serves `queues`."""
    where = f"TASKS[{alias!r}]"
    errors: list[checks.CheckMessage] = []
    if not apps.is_installed("jobq.contrib.django"):
        errors.append(
            checks.Error(
                f"{where} names JobqBackend, but jobq.contrib.django is not installed",
                hint="add 'jobq.contrib.django' to INSTALLED_APPS: its migrations make "
                "jobq's tables, and `manage.py jobq supervise` runs the tasks",
                id="jobq.E001",
            )
        )
    if database is not None and database not in settings.DATABASES:
        errors.append(
            checks.Error(
                f"{where}['OPTIONS']['DATABASE'] is {database!r}, not in DATABASES",
                hint=f"use one of {sorted(settings.DATABASES)}, or leave it out for "
                "JOBQ['DATABASE']",
                id="jobq.E002",
            )
        )
    for name in sorted(queues, key=str):
        try:
            check_type_name(name)
        except ValueError as error:
            errors.append(
                checks.Error(
                    f"{where}['QUEUES']: {error}",
                    hint="a queue is served as a jobq job type: rename it",
                    id="jobq.E003",
                )
            )
    return errors
