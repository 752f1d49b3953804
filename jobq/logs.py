"""Log output for jobq's commands. The library itself only logs to the `jobq` logger."""

from __future__ import annotations

import logging
import sys

# Fields that jobq attaches to its log records (see queue.job_extra).
JOB_FIELDS = ("event", "job_id", "job_type", "attempt")


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


def configure(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(PlainFormatter())
    root = logging.getLogger("jobq")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
