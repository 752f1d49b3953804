"""The renewer: a process of the master's with one connection, running renewal rounds.

The master's loop never waits on the database: it sends a round and goes on fencing. A
round that does not come back within the renewal timeout gets the renewer killed (its
connection may be blackholed and never answer) and a new one forked for the retry. Its
statements are bounded on the server too, to about the renewal timeout: killing the renewer
does not stop a statement the server already runs, and one that waited for row locks could
otherwise run on, holding them, long after its round was given up.

A round the database refuses (its server is gone, or is a standby not yet promoted, as
through a failover) is tried again on a new connection until its timeout is nearly up: a
primary promoted within that time still gets the round, and the leases live on.
"""

from __future__ import annotations

import logging
import socket
import time

from setproctitle import setproctitle

from .. import protocol, wire
from ..backends.naming import name_process, of_this_host
from ..queue import Queue

log = logging.getLogger("jobq")

# The pause between two tries of one round, and the share of the round's timeout that its
# tries may start in: the last answer must reach the master before it gives up on the round.
RETRY_PAUSE = 0.2
TRYING_SHARE = 0.8


def serve(dsn: str, lease: float, timeout: float, sock: socket.socket) -> int:
    """Answer renewal rounds until the master closes the socket."""
    setproctitle("jobq-supervise: renewer")
    name_process(of_this_host("jobq renewer"))
    sock.setblocking(True)
    connection: Queue | None = None
    while (request := wire.receive(sock)) is not None:
        assert isinstance(request, protocol.Renew)
        reply, connection = renewed(request, connection, dsn, lease, timeout)
        wire.send(sock, reply)
    close_quietly(connection)
    return 0


def renewed(
    request: protocol.Renew, connection: Queue | None, dsn: str, lease: float, timeout: float
) -> tuple[protocol.Renewed, Queue | None]:
    """One round's answer, tried until TRYING_SHARE of its timeout is gone; and the
    connection to use for the next round (None: make a new one)."""
    deadline = time.monotonic() + timeout * TRYING_SHARE
    claims = [(job, token) for job, token in request.claims]
    while True:
        try:
            if connection is None:
                connection = connect(dsn, lease, timeout)
            renewal = connection._renewal_round(claims, request.started)
        except Exception as error:
            close_quietly(connection)
            connection = None
            if time.monotonic() + RETRY_PAUSE >= deadline:
                failed = protocol.Renewed(request.round, None, f"{type(error).__name__}: {error}")
                return failed, None
            time.sleep(RETRY_PAUSE)
            continue
        extended, cancelled = sorted(renewal.extended), tuple(sorted(renewal.cancelled))
        return protocol.Renewed(request.round, extended, None, cancelled), connection


def connect(dsn: str, lease: float, timeout: float) -> Queue:
    connection = Queue.connect(dsn, lease_duration=lease)
    connection._bound_statements(timeout)
    return connection


def close_quietly(connection: Queue | None) -> None:
    if connection is not None:
        try:
            connection.close()
        except Exception:
            log.debug("closing a failed connection failed too", exc_info=True)
