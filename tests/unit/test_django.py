"""jobq.contrib.django without Django running: the DSN it builds from DATABASES, and the
options `manage.py jobq` passes on."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured


def test_jobqs_dsn_is_built_from_djangos_databases() -> None:
    from jobq.contrib.django.settings import dsn_of

    postgresql = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "shop",
        "USER": "app",
        "PASSWORD": "p@ss:/word",
        "HOST": "db.internal",
        "PORT": 5433,
        "OPTIONS": {"sslmode": "require", "isolation_level": 1},
    }
    assert dsn_of(postgresql) == (
        "postgresql://app:p%40ss%3A%2Fword@db.internal:5433/shop?sslmode=require"
    )
    socket = {"ENGINE": "django.db.backends.postgresql", "NAME": "shop", "HOST": "/run/pg"}
    assert dsn_of(socket) == "postgresql:///shop?host=%2Frun%2Fpg"
    mysql = {"ENGINE": "django.db.backends.mysql", "NAME": "shop", "USER": "root", "PORT": ""}
    assert dsn_of(mysql) == "mysql://root@/shop"
    sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": "/srv/db.sqlite3"}
    assert dsn_of(sqlite) == "sqlite:////srv/db.sqlite3"
    with pytest.raises(ImproperlyConfigured, match="an SQLite file"):
        dsn_of({"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"})
    with pytest.raises(ImproperlyConfigured, match=r"ENGINE 'django\.db\.backends\.oracle'"):
        dsn_of({"ENGINE": "django.db.backends.oracle", "NAME": "x"})


def test_manage_py_jobq_hands_jobq_only_its_own_options() -> None:
    from jobq.contrib.django.management.commands.jobq import passed_on

    given = ["--workers", "2", "--settings", "project.settings", "--pythonpath=/srv", "-v"]
    assert passed_on(given) == ["--workers", "2", "-v"]
