"""A MySQL DSN read into PyMySQL's connect() arguments: a URL, its query naming only the
options jobq passes on, and never its password in an error."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ...dsn import scrub
from ...errors import ConfigurationError

# The only character set that carries all of Unicode, as jobq's tables store it.
CHARSET = "utf8mb4"


def connect_args(dsn: str) -> dict[str, Any]:
    """mysql://user:password@host:port/database?unix_socket=/path&charset=utf8mb4."""
    parts = urlsplit(dsn)
    try:
        port = parts.port or 3306
    except ValueError:
        # First, and not in the parser's words, which quote the "port": a password's first
        # part, when a "?" or "#" in it ends what urlsplit reads as the host (and its rest
        # would be read as the query).
        raise ConfigurationError(
            f"bad MySQL DSN {scrub(dsn, dsn)!r}: its port is not a number (percent-encode a "
            "'?' or '#' in the user name or password, as %3F or %23)"
        ) from None
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    unknown = set(query) - {"unix_socket", "charset", "connect_timeout"}
    if unknown:
        raise ConfigurationError(f"unknown MySQL DSN parameter(s): {', '.join(sorted(unknown))}")
    database = unquote(parts.path.lstrip("/"))
    if not database:
        raise ConfigurationError("a MySQL DSN must name a database: mysql://user@host/database")
    try:
        timeout = float(query.get("connect_timeout", 10))
    except ValueError as error:
        raise ConfigurationError(f"bad MySQL DSN {scrub(dsn, dsn)!r}: {error}") from None
    charset = query.get("charset", CHARSET)
    if charset.lower() != CHARSET:
        # utf8 (utf8mb3) cannot carry a 4-byte character: an error message holding one could
        # not be written, so the attempt's end was lost and its job waited out its lease.
        raise ConfigurationError(
            f"MySQL DSN {scrub(dsn, dsn)!r} asks for charset={charset}, which cannot carry "
            f"every character a job's error or payload may hold: drop charset from the DSN, "
            f"or give charset={CHARSET}"
        )
    args: dict[str, Any] = {
        "host": parts.hostname or "localhost",
        "port": port,
        "user": unquote(parts.username or "root"),
        "password": unquote(parts.password or ""),
        "database": database,
        "charset": CHARSET,
        "connect_timeout": timeout,
    }
    if "unix_socket" in query:
        args["unix_socket"] = query["unix_socket"]
    return args
