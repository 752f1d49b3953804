"""Log output for jobq's commands. The library itself only logs to the `jobq` logger."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

from .dsn import scrub

# Fields that jobq attaches to its log records (see outcomes.job_extra).
JOB_FIELDS = ("event", "job_id", "job_type", "attempt")
# Fields of the master's records about one of its workers: its pid, and how it exited. Only
# the JSON format writes them: a plain line has them in its message already.
WORKER_FIELDS = ("worker", "exit")

FORMATS = ("plain", "json")


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
