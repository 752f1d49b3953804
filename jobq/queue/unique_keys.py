"""unique_key: checked at enqueue, before the database's unique index of active jobs (see
backends/uniqueness.py) decides which job holds it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..job import Job

# A unique_key fits the column and unique index of every database (VARCHAR(255) on MySQL).
MAX_UNIQUE_KEY = 255


def check_unique_key(key: object) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key:
        raise ValueError(f"unique_key must be a non-empty string or None, got {key!r}")
    if len(key) > MAX_UNIQUE_KEY:
        raise ValueError(
            f"unique_key is {len(key)} characters long, over jobq's limit of {MAX_UNIQUE_KEY}: "
            f"{key[:40]!r}…"
        )
    # Every database must store it as given: none takes a NUL, none a lone surrogate (which
    # is every surrogate in a Python string).
    if "\x00" in key or any("\ud800" <= char <= "\udfff" for char in key):
        raise ValueError(f"unique_key must be text without NUL bytes or lone surrogates: {key!r}")
    return key


UniqueKeys = Callable[[Job], str | None] | Sequence[str | None] | None


def unique_keys(keys: UniqueKeys, jobs: Sequence[Job]) -> list[str | None]:
    """enqueue_many's unique_key: a function of each job, or one key (or None) per job."""
    if keys is None:
        return [None] * len(jobs)
    if callable(keys):
        return [keys(job) for job in jobs]
    if isinstance(keys, str) or len(keys) != len(jobs):
        raise ValueError(
            "enqueue_many's unique_key is a function of the job, or one key (or None) per job"
        )
    return list(keys)
