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
    ipv6 = {**postgresql, "HOST": "::1", "OPTIONS": {}}
    assert dsn_of(ipv6) == "postgresql://app:p%40ss%3A%2Fword@[::1]:5433/shop"
    zoned = {**ipv6, "HOST": "fe80::1%eth0", "PORT": ""}
    assert dsn_of(zoned) == "postgresql://app:p%40ss%3A%2Fword@[fe80::1%25eth0]/shop"
    ipv4 = {**ipv6, "HOST": "10.0.0.7"}
    assert dsn_of(ipv4) == "postgresql://app:p%40ss%3A%2Fword@10.0.0.7:5433/shop"
    mysql_ipv6 = {"ENGINE": "django.db.backends.mysql", "NAME": "shop", "HOST": "::1"}
    assert dsn_of(mysql_ipv6) == "mysql://[::1]/shop"
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
