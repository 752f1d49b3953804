"""`jobq web`: the status page on waitress, a production WSGI server, bound safely."""

from __future__ import annotations

import ipaddress
import sys
from typing import Any

from waitress.server import create_server

from ..errors import ConfigurationError
from ..options import LAST_PORT
from .auth import (
    PASSWORD_VARIABLE,
    READ_ONLY_TOKEN_VARIABLE,
    TOKEN_VARIABLE,
    USER_VARIABLE,
    Credentials,
)

# Requests are served by this many threads; they take turns at the one database connection,
# so more would only queue there, while one would let a slow client hold up the rest.
THREADS = 4


def parse_bind(text: str) -> tuple[str, int]:
    """HOST:PORT, [IPv6]:PORT, as given to --bind."""
    host, colon, port = text.rpartition(":")
    if not colon or not host or not port.isdigit() or int(port) > LAST_PORT:
        raise ConfigurationError(f"--bind must be HOST:PORT, e.g. 127.0.0.1:8080, got {text!r}")
    return host.removeprefix("[").removesuffix("]"), int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name may resolve anywhere


def check_exposure(host: str, credentials: Credentials) -> None:
    """Refuse to serve beyond this machine without authentication."""
    if not is_loopback(host) and not credentials.configured:
        raise ConfigurationError(
            f"refusing to serve the status page on {host}, which is not a loopback address, "
            f"without authentication: set {TOKEN_VARIABLE} (bearer token), or "
            f"{USER_VARIABLE} and {PASSWORD_VARIABLE} (HTTP basic), or the read-only "
            f"role's {READ_ONLY_TOKEN_VARIABLE}"
        )


def serve(app: Any, host: str, port: int) -> None:
    """Serve until interrupted; says where on stderr first (port 0 takes any free one)."""
    server: Any = create_server(app, host=host, port=port, threads=THREADS, ident="jobq")
    shown = f"[{host}]" if ":" in host else host
    print(f"jobq web: serving on http://{shown}:{server.effective_port}/", file=sys.stderr)
    sys.stderr.flush()
    server.run()
