"""The renewer: a process of the master's with one connection, running renewal rounds.

The master's loop never waits on the database: it sends a round and goes on fencing. A
round that does not come back within the renewal timeout gets the renewer killed (its
connection may be blackholed and never answer) and a new one forked for the retry. Its
statements are bounded on the server too, to about the renewal timeout: killing the renewer
does not stop a statement the server already runs, and one that waited for row locks could
otherwise run on, holding them, long after its round was given up.
"""

from __future__ import annotations

import logging
import socket

from setproctitle import setproctitle

from .. import protocol, wire
from ..queue import Queue

log = logging.getLogger("jobq")


def serve(dsn: str, lease: float, timeout: float, sock: socket.socket) -> int:
    """Answer renewal rounds until the master closes the socket."""
    setproctitle("jobq-supervise: renewer")
    sock.setblocking(True)
    connection: Queue | None = None
    while (request := wire.receive(sock)) is not None:
        assert isinstance(request, protocol.Renew)
        try:
            if connection is None:
                connection = Queue.connect(dsn, lease_duration=lease)
                connection._bound_statements(timeout)
            renewal = connection._renewal_round([(job, token) for job, token in request.claims])
            reply = protocol.Renewed(
                request.round, sorted(renewal.extended), cancelled=tuple(sorted(renewal.cancelled))
            )
        except Exception as error:
            reply = protocol.Renewed(request.round, None, f"{type(error).__name__}: {error}")
            close_quietly(connection)
            connection = None
        wire.send(sock, reply)
    close_quietly(connection)
    return 0


def close_quietly(connection: Queue | None) -> None:
    if connection is not None:
        try:
            connection.close()
        except Exception:
            log.debug("closing a failed connection failed too", exc_info=True)
