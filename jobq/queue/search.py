"""Finding jobs by a JobFilter, as the Queue offers it: the filter checked before any
statement runs (a name, a priority or a path that can be no job's is a ValueError naming
it), then one window of the backend's search (backends/search.py)."""

from __future__ import annotations

import re

from ..backends.base import Backend
from ..backends.search import Found
from ..backends.steps import Steps
from ..job import check_type_name
from ..records import JobFilter
from .controls import MAX_LIMIT, checked_priority, is_id

# A payload path's key: letters, digits, _ and -, so that it needs no quoting in any
# database's path syntax, and cannot end the quotes it is put in.
PATH_KEY = re.compile(r"[A-Za-z0-9_-]{1,100}")
# The most keys a payload path may hold; and the most characters of a searched text.
PATH_DEPTH = 8
TEXT_LIMIT = 500


def path_of(text: str) -> tuple[str, ...]:
    """A dotted payload path ("customer.id") as its keys, refused unless each is plain."""
    keys = tuple(text.split("."))
    if len(keys) > PATH_DEPTH or not all(PATH_KEY.fullmatch(key) for key in keys):
        raise ValueError(
            f"a payload field must be keys joined by dots (letters, digits, _ and -; at most "
            f"{PATH_DEPTH}), such as customer.id, got {text!r}"
        )
    return keys


def checked(wanted: JobFilter) -> JobFilter:
    if wanted.type is not None:
        check_type_name(wanted.type)
    if wanted.priority is not None:
        checked_priority(wanted.priority)
    if wanted.path:
        path_of(".".join(wanted.path))
    if bool(wanted.path) != (wanted.equals is not None):
        raise ValueError("a payload filter needs both a field and the value it equals")
    for name in ("unique_key", "concurrency_key", "host", "equals", "error"):
        given = getattr(wanted, name)
        if given is not None and len(given) > TEXT_LIMIT:
            raise ValueError(f"{name} may be at most {TEXT_LIMIT} characters long")
    return wanted


def search_steps(
    backend: Backend, wanted: JobFilter, limit: int, before_id: int | None
) -> Steps[Found]:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_LIMIT:
        raise ValueError(f"limit must be a whole number from 1 to {MAX_LIMIT}, got {limit!r}")
    if before_id is not None and not is_id(before_id):
        raise ValueError(f"before_id must be a job id (a positive int), got {before_id!r}")
    return backend.search_steps(checked(wanted), limit, before_id)
