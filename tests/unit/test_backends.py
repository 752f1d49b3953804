"""DSNs parsed and refused without a database: schemes, missing parts, bad numbers, redaction."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import jobq
import jobq.backends.sqlite
from jobq.dsn import redact


def test_sqlite_too_old_is_a_clear_configuration_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The backend does `import sqlite3` and reads the version at connect time, so patching the
    # module object it holds (the real sqlite3, restored afterwards) is what it will see.
    monkeypatch.setattr("jobq.backends.sqlite.sqlite3.sqlite_version_info", (3, 30, 0))
    monkeypatch.setattr("jobq.backends.sqlite.sqlite3.sqlite_version", "3.30.0")
    with pytest.raises(jobq.ConfigurationError) as raised:
        jobq.Queue.connect(f"sqlite:///{tmp_path}/jobq.sqlite3")
    message = str(raised.value)
    assert "3.35.0" in message
    assert "3.30.0" in message


def test_unknown_scheme_names_the_supported_ones() -> None:
    with pytest.raises(jobq.ConfigurationError) as raised:
        jobq.Queue.connect("redis://x")
    message = str(raised.value)
    for scheme in ("mariadb", "mysql", "postgres", "postgresql", "sqlite"):
        assert re.search(rf"\b{scheme}\b", message), (scheme, message)


def test_unknown_scheme_error_does_not_leak_the_password() -> None:
    with pytest.raises(jobq.ConfigurationError) as raised:
        jobq.Queue.connect("redis://user:hunter2@x/0")
    assert "hunter2" not in str(raised.value)


@pytest.mark.parametrize("dsn", ["mysql://root@127.0.0.1:1", "mysql://root@127.0.0.1:1/"])
def test_mysql_dsn_must_name_a_database(dsn: str) -> None:
    # Port 1: the DSN must be rejected before any connection attempt.
    with pytest.raises(jobq.ConfigurationError, match="database"):
        jobq.Queue.connect(dsn)


def test_mysql_dsn_unknown_parameter_is_named() -> None:
    with pytest.raises(jobq.ConfigurationError, match="sslmode"):
        jobq.Queue.connect("mysql://root@127.0.0.1:1/db?charset=utf8mb4&sslmode=require")


@pytest.mark.parametrize("dsn", ["sqlite://relative", "sqlite:relative", "sqlite:///"])
def test_malformed_sqlite_dsn(dsn: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # so a wrongly accepted DSN cannot litter the checkout
    with pytest.raises(jobq.ConfigurationError, match=re.escape("sqlite:///")):
        jobq.Queue.connect(dsn)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        ("postgresql://u:pw@h/db", "postgresql://u:***@h/db"),
        ("mysql://u:pw@h:3306/db", "mysql://u:***@h:3306/db"),
        ("host=h password=pw", "host=h password=***"),
        (
            "postgresql://u@h/db?password=pw&sslmode=require",
            "postgresql://u@h/db?password=***&sslmode=require",
        ),
        ("sqlite:////tmp/jobq.sqlite3", "sqlite:////tmp/jobq.sqlite3"),
        ("mysql://u@h:3306/db", "mysql://u@h:3306/db"),
        ("host=h password='p w' user=u", "host=h password=*** user=u"),
        ("mysql://u:p@ss@h/db", "mysql://u:***@h/db"),
    ],
)
def test_redact_hides_passwords_only(dsn: str, expected: str) -> None:
    assert redact(dsn) == expected


@pytest.mark.parametrize(
    "dsn", ["mysql://u:s3cret@h:port/db", "mysql://u:s3cret@h/db?connect_timeout=soon"]
)
def test_mysql_dsn_with_bad_numbers_is_a_clear_error(dsn: str) -> None:
    with pytest.raises(jobq.ConfigurationError, match="bad MySQL DSN") as error:
        jobq.Queue.connect(dsn)
    assert "s3cret" not in str(error.value)
