"""Multi-host DSNs, as a failover needs them, shown wherever jobq shows a DSN: whole (every
host, the query) and without their password; and a bare "@" in the credentials refused
with its fix. No server: the CLI's connections are refused on loopback ports 1 and 2."""

from __future__ import annotations

import logging

import pytest

import jobq
from jobq import logs
from jobq.backends import for_dsn
from jobq.cli import commands, supervise
from jobq.dsn import redact, scrub

LOOPBACK = "127.0.0.1:1,127.0.0.1:2"

# (DSN, how jobq shows it, its password)
MULTI_HOST = [
    ("postgresql://u:pw@h1:5432,h2:5433/db", "postgresql://u:***@h1:5432,h2:5433/db", "pw"),
    (
        "postgresql://u:s3cret@h1:5432,h2:5433/db?target_session_attrs=read-write",
        "postgresql://u:***@h1:5432,h2:5433/db?target_session_attrs=read-write",
        "s3cret",
    ),
    # Percent-encoded, as a password with an "@" must be: neither form may show.
    (
        "postgresql://u:p%40ss@h1:5432,h2:5433/db?target_session_attrs=read-write",
        "postgresql://u:***@h1:5432,h2:5433/db?target_session_attrs=read-write",
        "p@ss",
    ),
    (
        "host=h1,h2 port=5432,5433 user=u password=s3cret dbname=db",
        "host=h1,h2 port=5432,5433 user=u password=*** dbname=db",
        "s3cret",
    ),
]
BARE_AT = [
    f"postgresql://u:p@ss@{LOOPBACK}/db?target_session_attrs=read-write",
    "postgresql://u@tenant:p@ss@h1,h2/db",
    "mysql://u:p@ss@h/db",
]


@pytest.mark.parametrize(("dsn", "shown", "password"), MULTI_HOST)
def test_a_multi_host_dsn_is_shown_whole_without_its_password(
    dsn: str, shown: str, password: str
) -> None:
    assert redact(dsn) == shown
    assert scrub(dsn, dsn) == shown
    # A driver's error that quotes the DSN, then the password alone.
    quoted = scrub(f'connection to "{dsn}" failed: bad password {password!r}', dsn)
    assert quoted == f"connection to \"{shown}\" failed: bad password '***'"


@pytest.mark.parametrize(("dsn", "shown", "password"), MULTI_HOST)
def test_no_log_line_shows_a_multi_host_dsn_password(dsn: str, shown: str, password: str) -> None:
    record = logging.makeLogRecord({"msg": "Worker cannot start: %s", "args": (f"{dsn} refused",)})
    assert logs.ScrubDsn(dsn).filter(record)
    assert record.getMessage() == f"Worker cannot start: {shown} refused"


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        (
            f"postgresql://u:s3cret@{LOOPBACK}/db?target_session_attrs=read-write",
            f"cannot connect to postgresql://u:***@{LOOPBACK}/db?target_session_attrs=read-write",
        ),
        (
            f"postgresql://u:p%40ss@{LOOPBACK}/db",
            f"cannot connect to postgresql://u:***@{LOOPBACK}/db",
        ),
        (
            "host=127.0.0.1,127.0.0.1 port=1,2 user=u password=s3cret dbname=db",
            "unsupported DSN 'host=127.0.0.1,127.0.0.1 port=1,2 user=u password=*** dbname=db'",
        ),
    ],
)
def test_a_cli_error_shows_a_multi_host_dsn_without_its_password(
    dsn: str, shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert commands.main(["stats", "--dsn", dsn]) in (1, 2)
    err = capsys.readouterr().err
    assert shown in err, err
    for password in ("s3cret", "p%40ss", "p@ss"):
        assert password not in err


@pytest.mark.parametrize("dsn", BARE_AT)
def test_a_bare_at_in_the_credentials_is_refused_with_its_fix(dsn: str) -> None:
    # libpq would end the password at the first "@" and quote the rest as a host name.
    with pytest.raises(jobq.ConfigurationError) as refused:
        for_dsn(dsn)
    message = str(refused.value)
    assert "percent-encode it, writing each '@' in them as %40" in message
    assert redact(dsn) in message
    assert "ss@" not in message
    assert "\n" not in message


def test_the_supervisor_refuses_a_bare_at_in_one_line_before_starting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert supervise.main(["--dsn", BARE_AT[0]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"u:***@{LOOPBACK}/db" in err, err
    assert "%40" in err, err
    assert "ss@" not in err


def test_an_at_in_the_query_or_a_key_value_password_is_not_refused() -> None:
    for_dsn("postgresql://u@h1,h2/db?password=p@ss")
    dsn = "host=h1,h2 password=p@ss dbname=db"
    assert scrub(dsn, dsn) == "host=h1,h2 password=*** dbname=db"


# Every character a generated password may hold: printable ASCII, a space, and beyond ASCII.
PASSWORD_CHARACTERS = [chr(code) for code in range(0x20, 0x7F)] + ["é", "€"]


@pytest.mark.parametrize("scheme", ["postgresql", "mysql"])
@pytest.mark.parametrize("character", PASSWORD_CHARACTERS)
def test_no_character_in_a_password_lets_any_of_it_show(scheme: str, character: str) -> None:
    dsn = f"{scheme}://jobq:Zx9{character}k+Qa8w==@127.0.0.1:1/db"
    shown = f"{scheme}://jobq:***@127.0.0.1:1/db"
    assert scrub(dsn, dsn) == shown
    record = logging.makeLogRecord({"msg": "cannot start: %s", "args": (f"{dsn} refused",)})
    assert logs.ScrubDsn(dsn).filter(record)
    assert record.getMessage() == f"cannot start: {shown} refused"


@pytest.mark.parametrize("scheme", ["postgresql", "mysql"])
def test_a_bare_slash_in_the_password_is_refused_with_its_fix(scheme: str) -> None:
    # libpq would take "postgres" for the host and "Zx9" for the port, and quote them.
    with pytest.raises(jobq.ConfigurationError) as refused:
        for_dsn(f"{scheme}://postgres:Zx9/k+Qa8w==@h/db")
    message = str(refused.value)
    assert f"'{scheme}://postgres:***@h/db'" in message
    assert "percent-encode a '/' in the user name or password as %2F" in message
