"""A TCP proxy for fault tests: put it between jobq and a database server, then break the link.

    with Proxy(address_of(dsn)) as proxy:
        run_something(proxied_dsn(dsn, proxy))
        proxy.blackhole()  # or proxy.delay(1500)
        ...
        proxy.restore()

Modes:
- forward: bytes flow both ways as they arrive.
- blackhole: nothing is read or written in either direction, but no socket is closed, so
  both ends see a peer that stopped answering (a network partition, a frozen server), not a
  reset. New connections are still accepted (the kernel would complete the handshake anyway)
  and are connected upstream only once the blackhole ends.
- delay: every chunk is held for the given latency before it is passed on, in both
  directions, so a request/response round trip costs twice that.
- restore: back to forward. What was held is delivered, as TCP retransmission would once a
  partition heals; a test that wants stale bytes to arrive harmlessly restores after the
  point where they can no longer matter.

Every thread polls with a short timeout and checks the stop flag, so closing the proxy ends
them all within a bounded time, whatever the peers do.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from types import TracebackType
from urllib.parse import urlsplit, urlunsplit

log = logging.getLogger(__name__)

# How often a waiting thread looks at the stop flag: the bound on how late it notices.
POLL = 0.05
CHUNK = 65536
# Past this many bytes held in one direction (a fast sender behind a long delay), the proxy
# stops reading from that side until some are delivered, as a full TCP window would.
MAX_HELD = 4 * 2**20
# The upstream is local: a connect that takes longer than this will not succeed.
CONNECT_TIMEOUT = 2.0
# The longest close() waits for all threads, altogether.
CLOSE_TIMEOUT = 5.0


@dataclass(frozen=True)
class Conditions:
    """What the link does to traffic right now."""

    blackholed: bool = False
    latency: float = 0.0  # seconds added to every chunk, each way


class Proxy:
    """A threaded TCP proxy on 127.0.0.1 (a free port) in front of `upstream`."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._conditions = Conditions()
        # Notified on every change of conditions and on close, so waiters react at once.
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._links: set[_Link] = set()
        self._links_lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(POLL)
        address = self._listener.getsockname()
        self.host: str = address[0]
        self.port: int = address[1]
        self.accepted = 0  # connections accepted so far, for tests that want to see them
        self._acceptor = threading.Thread(target=self._accept, name="proxy-accept", daemon=True)
        self._acceptor.start()

    # -- control ---------------------------------------------------------------------------

    @property
    def conditions(self) -> Conditions:
        with self._changed:
            return self._conditions

    def forward(self) -> None:
        """Pass bytes through as they come."""
        self._set(Conditions())

    def blackhole(self) -> None:
        """Stop forwarding in both directions, without closing anything."""
        self._set(Conditions(blackholed=True))

    def delay(self, milliseconds: float) -> None:
        """Forward, but hold every chunk this long first (each way)."""
        if milliseconds < 0:
            raise ValueError(f"latency must not be negative, got {milliseconds}")
        self._set(Conditions(latency=milliseconds / 1000))

    def restore(self) -> None:
        """End any fault: forward again, delivering whatever was held."""
        self.forward()

    @property
    def open_links(self) -> int:
        with self._links_lock:
            return len(self._links)

    # -- lifetime --------------------------------------------------------------------------

    def __enter__(self) -> Proxy:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop accepting, end every link and join every thread (bounded)."""
        self._stopping.set()
        with self._changed:
            self._changed.notify_all()
        deadline = time.monotonic() + CLOSE_TIMEOUT
        self._acceptor.join(max(0.0, deadline - time.monotonic()))
        self._listener.close()
        with self._links_lock:
            links = list(self._links)
        for link in links:
            link.shutdown()
        for link in links:
            link.join(max(0.0, deadline - time.monotonic()))
        threads = [self._acceptor, *(thread for link in links for thread in link.threads)]
        stuck = [thread.name for thread in threads if thread.is_alive()]
        if stuck:
            # Daemon threads cannot keep the interpreter alive; say so rather than hang.
            log.warning("proxy threads still running after close: %s", ", ".join(stuck))

    # -- internals -------------------------------------------------------------------------

    def _set(self, conditions: Conditions) -> None:
        with self._changed:
            self._conditions = conditions
            self._changed.notify_all()

    def _wait_while_blackholed(self) -> bool:
        """Block while the link is blackholed; False once the proxy is stopping."""
        with self._changed:
            while self._conditions.blackholed and not self._stopping.is_set():
                self._changed.wait(POLL)
        return not self._stopping.is_set()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed under us
            self.accepted += 1
            link = _Link(self, client)
            with self._links_lock:
                self._links.add(link)
            link.start()

    def _forget(self, link: _Link) -> None:
        with self._links_lock:
            self._links.discard(link)


class _Link:
    """One client connection and its upstream connection, pumped by two threads."""

    def __init__(self, proxy: Proxy, client: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream: socket.socket | None = None
        self.ended = threading.Event()
        number = proxy.accepted
        self.threads = [threading.Thread(target=self._run, name=f"proxy-{number}", daemon=True)]

    def start(self) -> None:
        self.threads[0].start()

    def _run(self) -> None:
        try:
            # A blackholed link takes connections but does not pass them on.
            if not self.proxy._wait_while_blackholed():
                return
            try:
                self.upstream = socket.create_connection(self.proxy.upstream, CONNECT_TIMEOUT)
            except OSError as error:
                # The server is down: the client sees its connection end, as it would.
                log.debug("proxy cannot reach %s: %s", self.proxy.upstream, error)
                return
            if self.ended.is_set():
                return
            # Non-blocking, so that a send to a peer that stopped reading cannot hang a pump.
            self.client.setblocking(False)
            self.upstream.setblocking(False)
            back = threading.Thread(
                target=self._pump,
                args=(self.upstream, self.client),
                name=f"{self.threads[0].name}-back",
                daemon=True,
            )
            self.threads.append(back)
            back.start()
            self._pump(self.client, self.upstream)
            back.join(CLOSE_TIMEOUT)
        finally:
            self.shutdown()
            self.client.close()
            if self.upstream is not None:
                self.upstream.close()
            self.proxy._forget(self)

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        """Copy source to target under the proxy's conditions until either side ends."""
        held: deque[tuple[float, bytes]] = deque()  # (received at, chunk)
        held_bytes = 0
        source_done = False
        try:
            while not self.ended.is_set():
                if not self.proxy._wait_while_blackholed():
                    return
                latency = self.proxy.conditions.latency
                now = time.monotonic()
                while held and held[0][0] + latency <= now:
                    chunk = held.popleft()[1]
                    held_bytes -= len(chunk)
                    if not self._send(target, chunk):
                        return
                if source_done and not held:
                    return
                wait = POLL if not held else min(POLL, held[0][0] + latency - now)
                readable = not source_done and held_bytes < MAX_HELD
                if not readable:
                    time.sleep(max(0.0, wait))
                elif _ready(source, select.POLLIN, max(0.0, wait)):
                    try:
                        chunk = source.recv(CHUNK)
                    except BlockingIOError:
                        continue
                    if chunk:
                        held.append((time.monotonic(), chunk))
                        held_bytes += len(chunk)
                    else:
                        source_done = True  # deliver what is held, then end the link
        except (OSError, ValueError):
            return  # a socket was shut down or reset: the link is over
        finally:
            self.shutdown()

    def _send(self, target: socket.socket, chunk: bytes) -> bool:
        """Send all of chunk, a bounded wait at a time; False if the link ended first."""
        view = memoryview(chunk)
        while view:
            if self.ended.is_set():
                return False
            if _ready(target, select.POLLOUT, POLL):
                with contextlib.suppress(BlockingIOError):
                    view = view[target.send(view) :]
        return True

    def shutdown(self) -> None:
        """End the link: wakes both pumps; the link's own thread closes the sockets."""
        self.ended.set()
        for sock in (self.client, self.upstream):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for thread in list(self.threads):
            if thread.is_alive():
                thread.join(max(0.0, deadline - time.monotonic()))


def _ready(sock: socket.socket, event: int, timeout: float) -> bool:
    """Whether sock is ready for `event` (or in error) within timeout seconds.

    poll, not select: select cannot watch a descriptor numbered past 1023.
    """
    poller = select.poll()
    poller.register(sock, event)
    return bool(poller.poll(timeout * 1000))


def address_of(dsn: str) -> tuple[str, int]:
    """The (host, port) a PostgreSQL or MySQL DSN points at."""
    parts = urlsplit(dsn)
    if parts.hostname is None or parts.port is None:
        raise ValueError("the DSN must name a host and a port")
    return parts.hostname, parts.port


def proxied_dsn(dsn: str, proxy: Proxy) -> str:
    """The same DSN (user, password, database, options) pointed at the proxy instead."""
    parts = urlsplit(dsn)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@" if userinfo else ""
    return urlunsplit(parts._replace(netloc=f"{netloc}{proxy.host}:{proxy.port}"))
