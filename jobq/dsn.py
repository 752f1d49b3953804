"""Where jobq's database is, and how to name a DSN without giving its password away."""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

from .errors import ConfigurationError

DEFAULT_DSN = "sqlite:///jobq.sqlite3"


def default_dsn() -> str:
    """JOBQ_DSN, or an SQLite file in the working directory."""
    return os.environ.get("JOBQ_DSN") or DEFAULT_DSN


def scheme_of(dsn: str) -> str:
    return dsn.split(":", 1)[0].lower() if ":" in dsn else ""


def redact(dsn: str) -> str:
    """The DSN with any password replaced, safe for logs and error messages."""
    # Up to the last @ before the path: a password may itself contain an @ (a DSN jobq
    # refuses, but shows in refusing it), and so may a user name.
    dsn = re.sub(r"(://[^/:]*:)[^/]*@", r"\1***@", dsn)
    return re.sub(r"(?i)(password=)('(?:[^'\\]|\\.)*'|[^&\s]*)", r"\1***", dsn)


def secrets_in(dsn: str) -> list[str]:
    """The password(s) a DSN carries, as written and percent-decoded, longest first."""
    found: set[str] = set()
    try:
        password = urlsplit(dsn).password
    except ValueError:
        password = None
    candidates = [password] if password else []
    # Up to the last "@", as redact() reads it, where urlsplit cannot parse the DSN.
    candidates += re.findall(r"://[^/:]*:([^/]*)@", dsn)
    candidates += re.findall(r"(?i)password=([^&\s]*)", dsn)
    for candidate in candidates:
        found.update(value for value in (candidate, unquote(candidate)) if value)
    return sorted(found, key=len, reverse=True)


def refuse_bare_at(dsn: str) -> None:
    """Refuse a URL whose user name or password holds a bare "@". libpq ends the credentials
    at the first "@" and takes the rest for a host name, which its errors then quote, while
    Python's parsers end them at the last: the two would read different servers, and
    neither part of the password could be told from the text around it."""
    _, slashes, rest = dsn.partition("://")
    if slashes and re.split(r"[/?#]", rest, maxsplit=1)[0].count("@") > 1:
        raise ConfigurationError(
            f"the user name or password of DSN {redact(dsn)!r} holds an '@': "
            "percent-encode it, writing each '@' in them as %40"
        )


def scrub(text: str, dsn: str) -> str:
    """Text safe to print: drivers sometimes quote the DSN, password and all. scrub(dsn, dsn)
    is the DSN itself, fit to show."""
    for secret in secrets_in(dsn):
        text = text.replace(secret, "***")
    return redact(text)
