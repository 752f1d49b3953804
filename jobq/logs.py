"""Log output for jobq's commands. The library itself only logs to the `jobq` logger."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import stat
import sys
from collections.abc import Callable
from datetime import UTC, datetime

from .dsn import scrub

# Fields that jobq attaches to its log records (see outcomes.job_extra).
JOB_FIELDS = ("event", "job_id", "job_type", "attempt")
# Fields of the master's records about one of its workers: its pid, how it exited, its pool.
# Only the JSON format writes them: a plain line has them in its message already.
WORKER_FIELDS = ("worker", "exit", "pool")

FORMATS = ("plain", "json")

# What a never-blocking handler keeps of lines its reader has not taken yet; past it, lines
# are dropped (and counted, and the count written once the reader is back).
BACKLOG = 1 << 16


class PlainFormatter(logging.Formatter):
    """The usual one-line format, with the job's fields appended when a record has them."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = [
            f"{name}={getattr(record, name)}" for name in JOB_FIELDS[1:] if hasattr(record, name)
        ]
        return f"{line} ({' '.join(fields)})" if fields else line


class JsonFormatter(logging.Formatter):
    """One JSON object per line, for log pipelines: time, level, pid, message, and the job's
    fields (event, job_id, job_type, attempt) and the worker's (worker, exit) when the record
    has them."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        fields = JOB_FIELDS + WORKER_FIELDS
        entry.update({name: getattr(record, name) for name in fields if hasattr(record, name)})
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, default=str)


class ScrubDsn(logging.Filter):
    """Takes the DSN's password out of every line, wherever it came from: a driver's error
    can quote the DSN, and a traceback can quote the error. The one place that does it, so
    no log call has to remember to."""

    def __init__(self, dsn: str) -> None:
        super().__init__()
        self.dsn = dsn

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = scrub(record.getMessage(), self.dsn), None
        if record.exc_info:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        if record.exc_text:
            record.exc_text = scrub(record.exc_text, self.dsn)
        return True


def configure(level: str = "INFO", format: str = "plain", dsn: str | None = None) -> None:
    """Log jobq's records to stderr; with `dsn`, never its password."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if format == "json" else PlainFormatter())
    if dsn is not None:
        handler.addFilter(ScrubDsn(dsn))
    root = logging.getLogger("jobq")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


class NonBlockingStderr(logging.Handler):
    """Writes to stderr without ever waiting for its reader: the supervisor's processes must
    go on fencing when a log pipe stalls (`| tee` stopped, a log driver under pressure).
    Lines the reader has not taken wait in a small backlog; past it they are dropped and
    counted, and the count is logged once lines get through again.

    It writes through a file description of its own: O_NONBLOCK set on fd 2 itself would
    be set for every process sharing that description, job code and the shell's included.
    A pipe, a FIFO or a terminal is opened again through /proc/self/fd (a private
    description of the same pipe); a socket (journald) is sent to with MSG_DONTWAIT; a
    regular file never waits on a reader, and is written as it is."""

    def __init__(self, fd: int = 2) -> None:
        super().__init__()
        self.fd, self.write = private_writer(fd)
        self.backlog = bytearray()
        self.dropped = 0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = (self.format(record) + "\n").encode(errors="replace")
        except Exception:
            self.handleError(record)
            return
        if len(self.backlog) + len(line) > BACKLOG:
            self.dropped += 1
        else:
            self.backlog += line
        self.flush()

    def flush(self) -> None:
        """Write what the reader takes now; never wait for it."""
        while self.backlog:
            try:
                written = self.write(bytes(self.backlog))
            except BlockingIOError:
                return
            except OSError:  # the reader is gone for good: nothing will take these
                self.backlog.clear()
                return
            del self.backlog[:written]
            if not self.backlog and self.dropped:
                self.backlog += self.dropped_note()

    def dropped_note(self) -> bytes:
        note = logging.makeLogRecord(
            {
                "name": "jobq",
                "levelno": logging.WARNING,
                "levelname": "WARNING",
                "msg": f"{self.dropped} log lines were dropped: stderr was not being read",
                "event": "log_dropped",
            }
        )
        self.dropped = 0
        return (self.format(note) + "\n").encode(errors="replace")


def private_writer(fd: int) -> tuple[int, Callable[[bytes], int]]:
    """A descriptor writing where `fd` does, and a write to it that never blocks."""
    mode = os.fstat(fd).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        with contextlib.suppress(OSError):  # no /proc, or a FIFO with no reader left
            flags = os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY | os.O_APPEND
            private = os.open(f"/proc/self/fd/{fd}", flags)
            return private, lambda data: os.write(private, data)
    copy = os.dup(fd)
    if stat.S_ISSOCK(mode):
        sock = socket.socket(fileno=copy)
        return copy, lambda data: sock.send(data, socket.MSG_DONTWAIT)
    return copy, lambda data: os.write(copy, data)


def never_block() -> None:
    """Have jobq's stderr log never wait for its reader (see NonBlockingStderr), keeping its
    format and filters. For the supervisor, whose fences must not wait on a log pipe."""
    root = logging.getLogger("jobq")
    for index, handler in enumerate(root.handlers):
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stderr:
            replacement = NonBlockingStderr()
            replacement.setFormatter(handler.formatter)
            for each in handler.filters:
                replacement.addFilter(each)
            root.handlers[index] = replacement


def descriptors() -> set[int]:
    """The descriptors jobq's log handlers write to: a forked child keeps them."""
    found = set()
    for handler in logging.getLogger("jobq").handlers:
        if isinstance(handler, NonBlockingStderr):
            found.add(handler.fd)
        elif isinstance(handler, logging.StreamHandler):
            with contextlib.suppress(AttributeError, OSError, ValueError):
                found.add(handler.stream.fileno())
    return found


def flush() -> None:
    """Before os._exit: write what jobq's handlers still hold, if the reader takes it."""
    for handler in logging.getLogger("jobq").handlers:
        handler.flush()
