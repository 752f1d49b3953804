"""Where jobq's database is, and how to name a DSN without giving its password away."""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

from .errors import ConfigurationError

DEFAULT_DSN = "sqlite:///jobq.sqlite3"
# jobq's variables that hold secrets: the database's password, the status page's credentials
# and key. Every program a job starts inherits its worker's environment.
SECRET_VARIABLES = ("JOBQ_DSN", "JOBQ_LISTEN_DSN")
SECRET_PREFIX = "JOBQ_WEB_"
# Those taken out of this process's environment, kept where jobq's own code reads them.
withheld: dict[str, str] = {}


def default_dsn() -> str:
    """JOBQ_DSN, or an SQLite file in the working directory."""
    return os.environ.get("JOBQ_DSN") or withheld.get("JOBQ_DSN") or DEFAULT_DSN


def withhold_secrets() -> None:
    """Take jobq's secrets out of the environment, which the programs a job starts inherit.
    Called in a worker once it has read them (and the application and its on_worker_start
    hooks have too): a job's Queue.connect() still finds the DSN, its subprocesses do not."""
    for name in list(os.environ):
        if name in SECRET_VARIABLES or name.startswith(SECRET_PREFIX):
            withheld[name] = os.environ.pop(name)


def scheme_of(dsn: str) -> str:
    return dsn.split(":", 1)[0].lower() if ":" in dsn else ""


# A URL DSN's password: from the ":" after the user name to the last "@" before the host.
# Generated passwords hold "/", "?", "#" and ":" as often as not, so neither the first "/" nor
# urlsplit's netloc ends one; in text, only whitespace ends the DSN. Reading too far (an "@" in
# the query) hides more than the password, never less.
PASSWORD = re.compile(r"(://[^/:\s]*:)\S*@")
KEYWORD_PASSWORD = re.compile(r"(?i)(password=)('(?:[^'\\]|\\.)*'|[^&\s]*)")


def redact(dsn: str) -> str:
    """The DSN with any password replaced, safe for logs and error messages."""
    return KEYWORD_PASSWORD.sub(r"\1***", PASSWORD.sub(r"\1***@", dsn))


def secrets_in(dsn: str) -> list[str]:
    """The password(s) a DSN carries, as written and percent-decoded, longest first."""
    found: set[str] = set()
    try:
        password = urlsplit(dsn).password
    except ValueError:
        password = None
    candidates = [password] if password else []
    # Where urlsplit reads it wrong (a "/", "?" or "#" in it) or not at all (a space): up to
    # the last "@", and up to the last one before the query, should the query hold an "@".
    start = re.search(r"://[^/:\s]*:", dsn)
    if start is not None:
        rest = dsn[start.end() :]
        candidates += [part.rpartition("@")[0] for part in (rest, re.split(r"[?#]", rest)[0])]
    candidates += re.findall(r"(?i)password=([^&\s]*)", dsn)
    for candidate in candidates:
        found.update(value for value in (candidate, unquote(candidate)) if value)
    return sorted(found, key=len, reverse=True)


def refuse_unencoded(dsn: str) -> None:
    """Refuse a URL whose user name or password holds a bare "@" or "/". libpq ends the
    credentials at the first "@" or "/" and takes the rest for a host name, port or database,
    which its errors then quote, while Python's parsers end them at the last "@" before the
    first "/": the readings would differ, and a password could not be told from the text
    around it."""
    _, slashes, rest = dsn.partition("://")
    if not slashes:
        return
    authority, _, path = re.split(r"[?#]", rest, maxsplit=1)[0].partition("/")
    if authority.count("@") > 1:
        fix = "percent-encode it, writing each '@' in them as %40"
        problem = "the user name or password of DSN {} holds an '@'"
    elif "@" in path:
        # A "/" in the password moves its "@" into what parsers take for the path.
        fix = (
            "percent-encode a '/' in the user name or password as %2F "
            "(an '@' in the database name as %40)"
        )
        problem = "DSN {} has an '@' after its first '/'"
    else:
        return
    raise ConfigurationError(f"{problem.format(repr(scrub(dsn, dsn)))}: {fix}")


def scrub(text: str, dsn: str) -> str:
    """Text safe to print: drivers sometimes quote the DSN, password and all. scrub(dsn, dsn)
    is the DSN itself, fit to show."""
    for secret in secrets_in(dsn):
        text = text.replace(secret, "***")
    return redact(text)
