"""Where jobq's database is, and how to name a DSN without giving its password away."""

from __future__ import annotations

import os
import re

DEFAULT_DSN = "sqlite:///jobq.sqlite3"


def default_dsn() -> str:
    """JOBQ_DSN, or an SQLite file in the working directory."""
    return os.environ.get("JOBQ_DSN") or DEFAULT_DSN


def scheme_of(dsn: str) -> str:
    return dsn.split(":", 1)[0].lower() if ":" in dsn else ""


def redact(dsn: str) -> str:
    """The DSN with any password replaced, safe for logs and error messages."""
    # Up to the last @ before the path: a password may itself contain an @.
    dsn = re.sub(r"(://[^/@:]*:)[^/]*@", r"\1***@", dsn)
    return re.sub(r"(?i)(password=)('(?:[^'\\]|\\.)*'|[^&\s]*)", r"\1***", dsn)
