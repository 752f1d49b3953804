"""How protocol.py's messages travel: one marshalled dict per datagram of a SOCK_SEQPACKET
socket pair, each message cut into parts its socket takes (a limit measured once per process)
and joined again on arrival, and an outbox for the master, which never waits on a socket.

marshal, not JSON: both ends are processes of one program, forked from one interpreter, so
they agree on its format; it encodes and decodes a worker's per-job report three to six
times faster than json, in fewer bytes, and keeps tuples tuples. (JSON's encoding
was 5.6% of a short job's client CPU.)"""

from __future__ import annotations

import errno
import marshal
import socket
import weakref
from collections import deque
from collections.abc import Iterator
from functools import cache
from typing import Any

from .protocol import Message, decode, encode

# The most a datagram can carry here, whatever the socket takes: what a receive reads.
MAX_MESSAGE = 1 << 18


class MessageTooLarge(ValueError):
    """A message that no split makes fit: one of its list's items alone is too large."""


@cache
def limit() -> int:
    """The largest datagram a socket pair takes, measured once per process (the master
    measures it at start, before any fork). A SOCK_SEQPACKET datagram must fit in the
    sender's send buffer, which the system's defaults size (about 208 KiB on Linux): below
    MAX_MESSAGE, and not known until tried."""
    ours, theirs = pair()
    try:
        ours.setblocking(False)
        low, high = 1, MAX_MESSAGE  # low fits; above high nothing is tried
        while low < high:
            size = (low + high + 1) // 2
            try:
                ours.send(bytes(size))
            except OSError as error:
                if error.errno not in (errno.EMSGSIZE, errno.ENOBUFS, errno.EAGAIN):
                    raise
                high = size - 1
            else:
                theirs.recv(MAX_MESSAGE)
                low = size
        return low
    finally:
        ours.close()
        theirs.close()


def parts(message: Message, most: int | None = None) -> list[bytes]:
    """The datagrams that carry `message`, each at most `most` bytes (the measured limit
    by default). A message whose lists make it too large is split: each part carries a
    slice of every list and the rest of the message, and all but the last say "more", so
    that receive() puts them back together. By construction, then, every message fits."""
    most = limit() if most is None else most
    fields = encode(message)
    data = marshal.dumps(fields)
    if len(data) <= most:
        return [data]
    # Room for the mark a part carries: an entry costs less than a dict holding just it.
    pieces = split(fields, most - len(marshal.dumps({"more": True})))
    for piece in pieces[:-1]:
        piece["more"] = True
    return [marshal.dumps(piece) for piece in pieces]


def split(fields: dict[str, Any], most: int) -> list[dict[str, Any]]:
    """Halve every list of an encoded message until each half encodes within `most`."""
    if len(marshal.dumps(fields)) <= most:
        return [fields]
    lists = [name for name, value in fields.items() if isinstance(value, list | tuple)]
    if all(len(fields[name]) <= 1 for name in lists):
        raise MessageTooLarge(f"a {fields['kind']} message does not fit in {most} bytes")
    first = {**fields, **{name: fields[name][: len(fields[name]) // 2] for name in lists}}
    second = {**fields, **{name: fields[name][len(fields[name]) // 2 :] for name in lists}}
    return split(first, most) + split(second, most)


def joined(pieces: list[dict[str, Any]]) -> dict[str, Any]:
    """The encoded message that these parts of it carry."""
    whole = dict(pieces[-1])
    for name, value in whole.items():
        if isinstance(value, list | tuple):
            whole[name] = type(value)(item for piece in pieces for item in piece[name])
    return whole


def send(sock: socket.socket, message: Message) -> None:
    """Send a message on a blocking socket: every part of it, or OSError."""
    for data in parts(message):
        sock.send(data)


class Outbox:
    """A non-blocking socket's messages, sent as far as it takes them: the master never
    waits on a process that is slow to read. What it could not take yet waits here, in
    order, until flush() is called again (the master does on every pass while any waits).

    A failure other than a full socket is the caller's to handle: put() and flush() raise
    it, and what was waiting is dropped (the other end is gone or going)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.waiting: deque[bytes] = deque()

    def put(self, message: Message) -> None:
        self.waiting.extend(parts(message))
        self.flush()

    def flush(self) -> None:
        while self.waiting:
            try:
                self.sock.send(self.waiting[0])
            except BlockingIOError:
                return
            except OSError:
                self.waiting.clear()
                raise
            self.waiting.popleft()


PARTS: weakref.WeakKeyDictionary[socket.socket, list[dict[str, Any]]] = weakref.WeakKeyDictionary()


def receive(sock: socket.socket) -> Message | None:
    """The next message, or None once the other side has closed its end. On a non-blocking
    socket, a message whose parts have not all arrived raises BlockingIOError as if none had,
    and is completed by a later call."""
    while True:
        data = sock.recv(MAX_MESSAGE)
        if not data:
            PARTS.pop(sock, None)
            return None
        fields = marshal.loads(data)
        if fields.pop("more", False):
            PARTS.setdefault(sock, []).append(fields)
            continue
        pieces = PARTS.pop(sock, None)
        return decode(joined([*pieces, fields]) if pieces else fields)


def waiting(sock: socket.socket) -> Iterator[Message]:
    """The messages already waiting on a non-blocking socket. Raises EOFError once the other
    end has closed and everything it sent was read."""
    while True:
        try:
            message = receive(sock)
        except (BlockingIOError, ConnectionResetError):
            return
        if message is None:
            raise EOFError
        yield message


def pair() -> tuple[socket.socket, socket.socket]:
    """(master's end, the other process's end)."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
