"""The name each connection jobq opens gives the database, so that a DBA reading
pg_stat_activity (PostgreSQL's application_name) or MariaDB's connection attributes
(program_name, in performance_schema.session_connect_attrs) can tell jobq's connections
apart from the application's, and one jobq process from another.

A process names itself once (`jobq web`, a supervisor's worker, its renewer); a thread may
name the connections it opens for itself alone. An application's own Queue.connect() is
"jobq". A DSN or PGAPPNAME that names the connection wins: the operator chose it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

DEFAULT = "jobq"
# PostgreSQL keeps 63 bytes of an application_name, and shows only printable ASCII of it.
LIMIT = 63

process_name = DEFAULT
# A new thread starts without a value: it takes the process's name.
thread_name: ContextVar[str | None] = ContextVar("jobq_connection_name", default=None)


def of_this_host(role: str) -> str:
    """ "jobq renewer of node-a": a role, and the machine it runs on."""
    return f"{role} of {socket.gethostname()}"


def name_process(name: str) -> None:
    """Name every connection this process opens from now on (threads that name their own
    aside)."""
    global process_name
    process_name = name


@contextmanager
def naming(name: str) -> Iterator[None]:
    """Name the connections this thread opens inside the block."""
    token = thread_name.set(name)
    try:
        yield
    finally:
        thread_name.reset(token)


def connection_name() -> str:
    name = thread_name.get() or process_name
    shown = "".join(c if " " <= c <= "~" else "?" for c in name)
    return shown[:LIMIT]


def application_name(dsn: str, environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """psycopg's keyword for the name, unless the DSN or the environment gives one."""
    if "application_name" in dsn or environ.get("PGAPPNAME"):
        return {}
    return {"application_name": connection_name()}
