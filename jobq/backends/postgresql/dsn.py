"""The DSN as libpq reads it."""

from __future__ import annotations


def libpq_dsn(dsn: str) -> str:
    """libpq takes only postgresql:// and postgres:// in lower case; jobq takes any case."""
    scheme, rest = dsn.split("://", 1)
    return f"postgresql://{rest}" if scheme.lower() in ("postgres", "postgresql") else dsn
