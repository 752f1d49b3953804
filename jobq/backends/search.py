"""Finding jobs by anything an operator knows of them (records.JobFilter), every backend's
way: one parameterised statement per page, its conditions from the filter, its database's
own only in how it reads a payload's field.

A filter on the payload or the error can match one job in a million, and no index answers
it: a page would read the whole table to find none. So each statement reads one window of
the primary key, SEARCH_WINDOW ids below the page's bound, and says where the next window
starts; a page costs the same on a table of any size, and "search further back" walks on.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar, NamedTuple

from ..records import JobFilter, JobRecord
from .controls import RECORD_COLUMNS
from .steps import Steps, every, value

# The ids one statement reads, at most: a window of the primary key. At 1,000,000 jobs the
# bench times a payload filter's page (bench/measures/status_page.py).
SEARCH_WINDOW = 50_000
# The escape character of the error filter's LIKE pattern: "!" means the same to every
# database, where a backslash is itself an escape in MariaDB's string literals.
LIKE_ESCAPE = "!"

# (column, filter field, comparison) of the conditions that compare a column to a value.
COMPARED = (
    ("type", "type", "="),
    ("priority", "priority", "="),
    ("created_at", "created_after", ">="),
    ("created_at", "created_before", "<"),
    ("scheduled_at", "scheduled_after", ">="),
    ("scheduled_at", "scheduled_before", "<"),
    ("finished_at", "finished_after", ">="),
    ("finished_at", "finished_before", "<"),
    ("unique_key", "unique_key", "="),
    ("limit_key", "concurrency_key", "="),
    ("host", "host", "="),
)


class Found(NamedTuple):
    """A page of matching jobs, newest first, and the id bound of the next page (the last
    id shown, or the end of the window read); None when no job is left below."""

    records: list[JobRecord]
    following: int | None


def json_path(keys: Sequence[str]) -> str:
    """A JSON path of these keys as MariaDB and SQLite read it, each key quoted (the core
    allows no quote in one)."""
    return "$" + "".join(f'."{key}"' for key in keys)


def like_pattern(text: str) -> str:
    """`text` anywhere, its % and _ meaning themselves, lowercased (compared so)."""
    escaped = text.lower()
    for special in (LIKE_ESCAPE, "%", "_"):
        escaped = escaped.replace(special, LIKE_ESCAPE + special)
    return f"%{escaped}%"


class Search:
    placeholder: ClassVar[str]
    # The text at a payload's JSON path, {path} naming the path parameter; NULL for a
    # payload that is no JSON object, or has nothing there.
    sql_payload_field: ClassVar[str]

    @abstractmethod
    def record(self, row: Sequence[Any]) -> JobRecord: ...

    @abstractmethod
    def moment(self, value: datetime) -> Any: ...

    @abstractmethod
    def payload_path(self, keys: Sequence[str]) -> Any:
        """The path parameter of sql_payload_field for these keys, in the database's form."""

    def search_steps(self, wanted: JobFilter, limit: int, before_id: int | None) -> Steps[Found]:
        """The newest `limit` jobs that match, below `before_id`, in one window of ids."""
        mark = self.placeholder.format
        # Above the newest job there is nothing to read: a page's bound starts below it.
        top = yield from value("SELECT max(id) FROM jobq_jobs")
        if top is None:
            return Found([], None)
        before_id = int(top) + 1 if before_id is None else min(before_id, int(top) + 1)
        floor = max(before_id - SEARCH_WINDOW, 0)
        conditions, params = self.conditions(wanted)
        conditions[:0] = [f"id < {mark('before')}", f"id >= {mark('floor')}"]
        params |= {"before": before_id, "floor": floor, "limit": limit}
        sql = (
            f"SELECT {RECORD_COLUMNS} FROM jobq_jobs WHERE {' AND '.join(conditions)} "
            f"ORDER BY id DESC LIMIT {mark('limit')}"
        )
        records = [self.record(row) for row in (yield from every(sql, params))]
        if len(records) == limit:
            return Found(records, records[-1].id)
        below = yield from value(
            f"SELECT max(id) FROM jobq_jobs WHERE id < {mark('floor')}", {"floor": floor}
        )
        return Found(records, None if below is None else floor)

    def conditions(self, wanted: JobFilter) -> tuple[list[str], dict[str, Any]]:
        """The filter as SQL conditions on named parameters, and those parameters."""
        mark = self.placeholder.format
        conditions: list[str] = []
        params: dict[str, Any] = {}
        if wanted.status is not None:
            conditions.append(f"status = {mark('status')}")
            params["status"] = str(wanted.status)
        for i, (column, name, comparison) in enumerate(COMPARED):
            given = getattr(wanted, name)
            if given is not None:
                conditions.append(f"{column} {comparison} {mark(f'v{i}')}")
                params[f"v{i}"] = self.moment(given) if isinstance(given, datetime) else given
        if wanted.path and wanted.equals is not None:
            field = self.sql_payload_field.format(path=mark("path"))
            conditions.append(f"{field} = {mark('equals')}")
            params |= {"path": self.payload_path(wanted.path), "equals": wanted.equals}
        if wanted.error:
            conditions.append(f"lower(last_error) LIKE {mark('error')} ESCAPE '{LIKE_ESCAPE}'")
            params["error"] = like_pattern(wanted.error)
        return conditions, params
