"""A small Django project for jobq's tests; ORDERS_DSN (a jobq DSN) names its database."""

from __future__ import annotations

import importlib.util
import os
from typing import Any
from urllib.parse import unquote, urlsplit

import django

SECRET_KEY = "jobq-tests-only"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
INSTALLED_APPS = ["jobq.contrib.django", "orders"]
if django.VERSION < (6,):
    # The backport's app registers the check that runs each task backend's check().
    INSTALLED_APPS.append("django_tasks")
elif importlib.util.find_spec("tasks_monitor") is not None:
    # django-tasks-monitor, a dashboard for any django.tasks backend, fed by the task
    # signals (Django 6 only; the test extra installs it there).
    INSTALLED_APPS.append("tasks_monitor")
JOBQ = {"DATABASE": "default"}
TASKS = {
    "default": {
        "BACKEND": "jobq.contrib.django.tasks.JobqBackend",
        "QUEUES": ["default", "tasks"],
        "OPTIONS": {"RETRY": {"max_attempts": 2, "backoff": 0}},
    }
}


def database(dsn: str) -> dict[str, Any]:
    url = urlsplit(dsn)
    if url.scheme == "sqlite":
        path = dsn.removeprefix("sqlite:///")
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": path,
            # Workers run in other processes: the test database must be a file too.
            "TEST": {"NAME": f"{path}.test"},
            # As the README advises: take the write lock at BEGIN, not halfway through.
            "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 20},
        }
    common = {
        "NAME": url.path.lstrip("/"),
        "USER": unquote(url.username or ""),
        "PASSWORD": unquote(url.password or ""),
        "HOST": url.hostname,
        "PORT": url.port,
    }
    if url.scheme == "mysql":
        import pymysql

        # Django's MySQL backend asks for mysqlclient 2.2.1+; PyMySQL speaks the same API.
        pymysql.version_info = (2, 2, 1, "final", 0)
        pymysql.install_as_MySQLdb()
        return {"ENGINE": "django.db.backends.mysql", **common}
    return {"ENGINE": "django.db.backends.postgresql", **common}


DATABASES = {"default": database(os.environ["ORDERS_DSN"])}
if os.environ.get("ORDERS_PERSISTENT_CONNECTIONS"):
    # A production site's choice: keep connections, and check one before reusing it.
    DATABASES["default"].update(CONN_MAX_AGE=None, CONN_HEALTH_CHECKS=True)
