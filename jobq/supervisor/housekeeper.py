"""The housekeeper: a process of the master's with its own connection, for the master's
other database work. It runs maintenance on an interval and fails the attempts of workers
that died holding them. None of this can delay a renewal, which has a process of its own."""

from __future__ import annotations

import logging
import select
import socket
import time

from setproctitle import setproctitle

from .. import protocol
from ..queue import FAILURE_OUTCOMES, Queue
from .renewer import close_quietly

log = logging.getLogger("jobq")


def serve(dsn: str, lease: float, interval: float, sock: socket.socket) -> int:
    """Work until the master says drain (after the failures it sent before) or goes away."""
    setproctitle("jobq-supervise: housekeeper")
    sock.setblocking(True)
    connection: Queue | None = None
    next_maintenance = time.monotonic()
    while True:
        wait = max(0.0, next_maintenance - time.monotonic())
        readable, _, _ = select.select([sock], [], [], wait)
        message = protocol.receive(sock) if readable else None
        if readable and not isinstance(message, protocol.FailAttempt | protocol.MeasureDepth):
            break  # drain, or the master closed the socket
        if message is None:
            # Before connecting: a database that cannot be reached is tried again next
            # interval, not in a tight loop that floods the log.
            next_maintenance = time.monotonic() + interval
        try:
            if connection is None:
                connection = Queue.connect(dsn, lease_duration=lease)
            if isinstance(message, protocol.FailAttempt):
                claim = message.claim.claim()
                status = connection._settle_failure(claim, message.error)
                outcome = FAILURE_OUTCOMES[status]
                protocol.send(sock, protocol.Settled(claim.type, str(outcome)))
            elif isinstance(message, protocol.MeasureDepth):
                protocol.send(sock, depth(connection))
            else:
                counts = connection.run_maintenance()
                protocol.send(sock, protocol.Maintained(counts))
                protocol.send(sock, depth(connection))
        except Exception as error:
            # Maintenance recovers whatever could not be failed here, after the lease.
            log.error("Supervisor database work failed: %s", error, extra={"event": "db_error"})
            close_quietly(connection)
            connection = None
            if message is None:
                protocol.send(sock, protocol.Maintained(None, f"{type(error).__name__}: {error}"))
    close_quietly(connection)
    return 0


def depth(connection: Queue) -> protocol.Depth:
    counts = connection._depth()
    return protocol.Depth(
        [(name, status, n) for (name, status), n in counts.items()],
        connection.oldest_ready(),
        tuple(sorted(connection.paused())),
    )
