"""/metrics, /healthz and /readyz, served from the master's own loop.

No server thread: the master forks, and a fork copies only the calling thread, so any lock
another thread held would stay held in the child. Connections are non-blocking and short;
a client that stalls is dropped after a few seconds.

A path may be held: its hold function, called when the request is in, starts whatever the
answer needs (the queue-depth reading, which the housekeeper makes) and says whether to wait
for it. A held request is answered when the master calls release(), or after HOLD_LIMIT.
"""

from __future__ import annotations

import contextlib
import logging
import resource
import selectors
import socket
import time
from collections.abc import Callable

from ..errors import ConfigurationError
from .listening import Listener

log = logging.getLogger("jobq")

# A handler returns (HTTP status, content type, body).
Response = tuple[int, str, bytes]
Handler = Callable[[], Response]
# Called when a request for its path is in: whether to hold the answer until release().
Hold = Callable[[], bool]

MAX_REQUEST = 8192
# What a request line must hold at least: its method and its path.
METHOD_AND_PATH = 2
STALL_LIMIT = 5.0
# The longest a held request waits; Prometheus's scrape timeout is commonly 1 s at the least.
HOLD_LIMIT = 0.5
REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}
# The most connections open at once: a scrape holds one for milliseconds, so this is plenty,
# and no more than a quarter of the file limit, which the master's pipes and sockets need.
MAX_CONNECTIONS = 64
FILE_LIMIT_SHARE = 4


def most_connections() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(1, min(MAX_CONNECTIONS, soft // FILE_LIMIT_SHARE))


class Connection:
    def __init__(self, endpoint: Endpoint, sock: socket.socket) -> None:
        self.endpoint = endpoint
        self.sock = sock
        self.opened = time.monotonic()
        self.request = b""
        self.reply = b""
        self.held_until = float("inf")

    def on_event(self, mask: int) -> None:
        try:
            if mask & selectors.EVENT_READ:
                self.read()
            if mask & selectors.EVENT_WRITE:
                self.write()
        except OSError:
            self.close()

    def read(self) -> None:
        data = self.sock.recv(4096)
        self.request += data
        if not data or len(self.request) > MAX_REQUEST:
            self.close()
        elif b"\r\n\r\n" in self.request or b"\n\n" in self.request:
            self.endpoint.selector.unregister(self.sock)
            hold = self.endpoint.holds.get(path_of(self.request))
            if hold is not None and hold():
                self.held_until = time.monotonic() + HOLD_LIMIT
                self.endpoint.held.add(self)
            else:
                self.answer()

    def answer(self) -> None:
        self.endpoint.held.discard(self)
        self.reply = self.endpoint.respond(self.request)
        self.endpoint.selector.register(self.sock, selectors.EVENT_WRITE, self)

    def write(self) -> None:
        sent = self.sock.send(self.reply)
        self.reply = self.reply[sent:]
        if not self.reply:
            self.close()

    def close(self) -> None:
        self.endpoint.connections.discard(self)
        self.endpoint.held.discard(self)
        with contextlib.suppress(KeyError, ValueError):
            self.endpoint.selector.unregister(self.sock)
        self.sock.close()
        self.endpoint.counted_connections()


class Endpoint:
    def __init__(
        self,
        selector: selectors.BaseSelector,
        address: str,
        port: int,
        handlers: dict[str, Handler],
        holds: dict[str, Hold],
        accept_failed: Callable[[], None],
    ) -> None:
        """`accept_failed` counts each connection that could not be accepted."""
        self.selector = selector
        self.handlers = handlers
        self.holds = holds
        self.held: set[Connection] = set()
        try:
            listening = socket.create_server((address, port), reuse_port=False)
        except OSError as error:  # before any fork: a port that cannot be bound stops the start
            raise ConfigurationError(
                f"cannot serve metrics on {address}:{port}: {error.strerror or error}"
            ) from None
        listening.setblocking(False)
        self.connections: set[Connection] = set()
        self.most = most_connections()
        self.listener = Listener(selector, listening, self, "metrics", accept_failed)
        log.info(
            "Serving /metrics, /healthz and /readyz on %s:%d",
            address,
            self.port,
            extra={"event": "metrics"},
        )

    @property
    def port(self) -> int:
        return int(self.listener.sock.getsockname()[1])

    def on_event(self, mask: int) -> None:
        sock = self.listener.accept()
        if sock is None:
            return
        sock.setblocking(False)
        connection = Connection(self, sock)
        self.connections.add(connection)
        self.selector.register(sock, selectors.EVENT_READ, connection)
        self.counted_connections()

    def counted_connections(self) -> None:
        """At the most connections, the rest wait in the backlog, or time out there."""
        self.listener.set_full(len(self.connections) >= self.most)

    def respond(self, request: bytes) -> bytes:
        parts = request.split(b"\r\n", 1)[0].split()
        if len(parts) < METHOD_AND_PATH:
            status, kind, body = plain(405, "bad request")
        elif parts[0] not in (b"GET", b"HEAD"):
            status, kind, body = plain(405, "only GET")
        else:
            handler = self.handlers.get(path_of(request))
            status, kind, body = handler() if handler else plain(404, "not found")
        head = (
            f"HTTP/1.1 {status} {REASONS.get(status, '')}\r\nContent-Type: {kind}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        return head if parts[:1] == [b"HEAD"] else head + body

    def release(self) -> None:
        """Answer every held request: what they waited for is in."""
        for connection in list(self.held):
            connection.answer()

    def due(self) -> float:
        """When the next held request must be answered, waited for or not, or the
        listener's pause after an error ends."""
        held = min((c.held_until for c in self.held), default=float("inf"))
        return min(held, self.listener.due())

    def tend(self, now: float) -> None:
        """Answer held requests whose wait is over, drop clients that stall, and listen again
        after a pause."""
        for connection in [c for c in self.held if now >= c.held_until]:
            connection.answer()
        for connection in [c for c in self.connections if now - c.opened > STALL_LIMIT]:
            connection.close()
        self.listener.tend(now)

    def close(self) -> None:
        for connection in list(self.connections):
            connection.close()
        self.listener.close()


def plain(status: int, *lines: str) -> Response:
    """A text/plain answer made of these lines."""
    return status, "text/plain", "".join(f"{line}\n" for line in lines).encode()


def path_of(request: bytes) -> str:
    parts = request.split(b"\r\n", 1)[0].split()
    return parts[1].split(b"?", 1)[0].decode("latin-1") if len(parts) >= METHOD_AND_PATH else ""
