"""Transaction poolers (PgBouncer and those built like it) in front of PostgreSQL: how a DSN
says one is there, how a connection finds one the DSN does not name, and what jobq does then
(no server-side prepared statements, which a pooler hands to other clients' connections)."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import errors as pgerrors

from ...errors import ConfigurationError

log = logging.getLogger("jobq")


def pool_mode(dsn: str) -> tuple[str, bool]:
    """The DSN without jobq's own pool_mode parameter, and whether it names a transaction
    pooler (pool_mode=transaction) rather than a session (pool_mode=session, the default)."""
    parts = urlsplit(dsn)
    query = parse_qsl(parts.query, keep_blank_values=True)
    modes = [value for key, value in query if key == "pool_mode"]
    if not modes:
        return dsn, False
    if modes[-1] not in ("session", "transaction"):
        raise ConfigurationError(
            f"pool_mode in the DSN must be session or transaction, got {modes[-1]!r}"
        )
    rest = urlencode([(key, value) for key, value in query if key != "pool_mode"])
    return urlunsplit(parts._replace(query=rest)), modes[-1] == "transaction"


# The DSN parameter that tells jobq of a transaction pooler (see pool_mode()).
POOL_MODE_HINT = "pool_mode=transaction"
# Told once per process: every connection of a worker has the same DSN.
told_of_pooler = False


def behind_pooler(connection: psycopg.Connection[Any]) -> bool:
    """Whether a pooler sits between this connection and its server. A pooler (PgBouncer,
    and those built like it) answers the client's login with a backend key of its own, since
    it routes cancel requests itself: the pid in it is not the server process's."""
    row = connection.execute("SELECT pg_backend_pid()").fetchone()
    return row is not None and row[0] != connection.info.backend_pid


def prepared_statement_lost(error: BaseException) -> bool:
    """A prepared statement this connection made missing, taken or redefined on the server
    connection its statement reached: a transaction pooler gave it another one."""
    return isinstance(
        error, pgerrors.InvalidSqlStatementName | pgerrors.DuplicatePreparedStatement
    ) or (isinstance(error, pgerrors.ProtocolViolation) and "prepared statement" in str(error))


def unprepared(connection: psycopg.Connection[Any], why: str) -> None:
    """Send no more server-side prepared statements on this connection, and tell the
    operator, once, what the DSN lacks."""
    global told_of_pooler
    connection.prepare_threshold = None
    if not told_of_pooler:
        told_of_pooler = True
        log.warning(
            "%s: jobq stops preparing statements on it; if it pools transactions, add %s "
            "to the DSN to say so from the start (idle workers then need --listen-dsn for "
            "wake-ups)",
            why,
            POOL_MODE_HINT,
            extra={"event": "pooler_detected"},
        )
