"""The master's control socket, which `jobq-supervise ctl` talks to: TTIN and TTOU for a
named pool, and the pools' sizes. A signal carries no name, so a pool is named here.

The socket is in the abstract namespace, named by the master's pid, so no file is left
behind and none needs a writable directory; it answers only its own user and root (the
peer's credentials say who connected). It is read from the master's loop, non-blocking,
one short line per connection, as the metrics endpoint is."""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import struct
from collections.abc import Callable

from .listening import Listener
from .pools import Pools

log = logging.getLogger("jobq")

# The longest request line; the most connections held at once (the oldest goes first).
MAX_REQUEST = 256
MAX_CONNECTIONS = 8
PEER = struct.Struct("3i")  # struct ucred: pid, uid, gid
USAGE = "say ttin POOL, ttou POOL or pools"
# How an answer that did nothing begins.
REFUSED = "refused: "


def address(pid: int) -> str:
    """The abstract address of the master of this pid."""
    return f"\0jobq-supervise-{pid}"


def open_control(
    selector: selectors.BaseSelector, pools: Pools, accept_failed: Callable[[], None]
) -> Control | None:
    """The control socket, or None (said in the log) if it cannot be had: the pools then
    answer only signals. `accept_failed` counts each connection that could not be accepted."""
    try:
        return Control(selector, pools, accept_failed)
    except OSError as error:
        log.warning("No control socket (%s): jobq-supervise ctl cannot reach this master", error)
        return None


class Control:
    def __init__(
        self, selector: selectors.BaseSelector, pools: Pools, accept_failed: Callable[[], None]
    ) -> None:
        self.selector = selector
        self.pools = pools
        listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listening.bind(address(os.getpid()))
        listening.listen(MAX_CONNECTIONS)
        listening.setblocking(False)
        self.connections: dict[socket.socket, bytes] = {}  # what each said so far
        self.listener = Listener(selector, listening, self, "control", accept_failed)

    def on_event(self, mask: int) -> None:
        sock = self.listener.accept()
        if sock is None:
            return
        if not self.trusted(sock):
            sock.close()
            return
        if len(self.connections) >= MAX_CONNECTIONS:  # a stalled client: dicts keep order
            self.drop(next(iter(self.connections)))
        sock.setblocking(False)
        self.connections[sock] = b""
        self.selector.register(sock, selectors.EVENT_READ, Reading(self, sock))

    def trusted(self, sock: socket.socket) -> bool:
        credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, PEER.size)
        _, uid, _ = PEER.unpack(credentials)
        return uid in (0, os.getuid())

    def read(self, sock: socket.socket) -> None:
        try:
            chunk = sock.recv(MAX_REQUEST)
        except BlockingIOError:
            return
        except OSError:
            self.drop(sock)
            return
        said = self.connections[sock] + chunk
        # Until its line is in; a client that closed without one is answered what it said.
        if chunk and b"\n" not in said and len(said) < MAX_REQUEST:
            self.connections[sock] = said
            return
        answer = self.answer(said.split(b"\n", 1)[0].decode("utf-8", "replace").strip())
        with contextlib.suppress(OSError):  # a few bytes into an empty buffer
            sock.send(answer.encode() + b"\n")
        self.drop(sock)

    def answer(self, line: str) -> str:
        command, _, pool = line.partition(" ")
        if line == "pools":
            return "\n".join(f"{p.name} {len(p.workers())}/{p.target}" for p in self.pools.all())
        if command not in ("ttin", "ttou") or not pool.strip():
            return f"{REFUSED}unknown command {line!r}: {USAGE}"
        names = self.pools.by_name
        if pool.strip() not in names:
            return f"{REFUSED}no pool {pool.strip()!r}: the pools are {', '.join(map(repr, names))}"
        return self.pools.scale(pool.strip(), +1 if command == "ttin" else -1)

    def drop(self, sock: socket.socket) -> None:
        self.connections.pop(sock, None)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(sock)
        sock.close()

    def due(self) -> float:
        return self.listener.due()

    def tend(self, now: float) -> None:
        self.listener.tend(now)

    def close(self) -> None:
        for sock in list(self.connections):
            self.drop(sock)
        self.listener.close()


class Reading:
    """A control connection, as the master's selector hands it back."""

    def __init__(self, control: Control, sock: socket.socket) -> None:
        self.control = control
        self.sock = sock

    def on_event(self, mask: int) -> None:
        self.control.read(self.sock)
