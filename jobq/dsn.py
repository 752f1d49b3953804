"""Where jobq's database is, and how to name a DSN without giving its password away."""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

DEFAULT_DSN = "sqlite:///jobq.sqlite3"


def default_dsn() -> str:
    """JOBQ_DSN, or an SQLite file in the working directory."""
    return os.environ.get("JOBQ_DSN") or DEFAULT_DSN


def scheme_of(dsn: str) -> str:
    return dsn.split(":", 1)[0].lower() if ":" in dsn else ""


def redact(dsn: str) -> str:
    """The DSN with any password replaced, safe for logs and error messages."""
    # Up to the last @ before the path: a password may itself contain an @.
    dsn = re.sub(r"(://[^/@:]*:)[^/]*@", r"\1***@", dsn)
    return re.sub(r"(?i)(password=)('(?:[^'\\]|\\.)*'|[^&\s]*)", r"\1***", dsn)


def secrets_in(dsn: str) -> list[str]:
    """The password(s) a DSN carries, as written and percent-decoded, longest first."""
    found: set[str] = set()
    try:
        password = urlsplit(dsn).password
    except ValueError:
        password = None
    candidates = [password] if password else []
    candidates += re.findall(r"://[^/@:]*:([^@/]*)@", dsn)
    candidates += re.findall(r"(?i)password=([^&\s]*)", dsn)
    for candidate in candidates:
        for value in (candidate, unquote(candidate)):
            # libpq ends the password at its first "@" and reports the rest as a host name.
            found.update(part for part in (value, *value.split("@")) if part)
    return sorted(found, key=len, reverse=True)


def scrub(text: str, dsn: str) -> str:
    """Text safe to print: drivers sometimes quote the DSN, password and all. scrub(dsn, dsn)
    is the DSN itself, fit to show."""
    for secret in secrets_in(dsn):
        text = text.replace(secret, "***")
    return redact(text)
