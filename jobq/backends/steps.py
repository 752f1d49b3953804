"""A backend operation as the statements it runs, apart from how they are run.

An operation is a generator: it yields each statement and is sent back what the statement
gave (its row count, one row, every row, or the new row's id), so its SQL, its parameters,
its control flow and the shaping of its rows are written once. The sync Backend drives it
on a DB-API connection; jobq.AsyncQueue drives the very same generator on an async driver's
connection. Only the I/O differs, and only the drivers below know which database it is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Iterable, Sequence
from enum import Enum
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")


class Fetch(Enum):
    """What a statement gives back to the operation that yielded it."""

    COUNT = "the number of rows it changed"
    ONE = "its first row, or None"
    ALL = "every row"
    LAST_ID = "the id it inserted (MySQL's LAST_INSERT_ID)"


class Statement(NamedTuple):
    sql: str
    params: Any
    fetch: Fetch


class CopyRows(NamedTuple):
    """PostgreSQL's binary COPY of `rows` by `statement`, its columns of `types` (type oids)."""

    statement: Any
    types: Sequence[int]
    rows: Iterable[Sequence[Any]]


Step = Statement | CopyRows
Steps = Generator[Step, Any, T]


def count(sql: str, params: Any = None) -> Steps[int]:
    return int((yield Statement(sql, params, Fetch.COUNT)))


def one(sql: str, params: Any = None) -> Steps[Any]:
    return (yield Statement(sql, params, Fetch.ONE))


def every(sql: str, params: Any = None) -> Steps[list[Any]]:
    return list((yield Statement(sql, params, Fetch.ALL)))


def value(sql: str, params: Any = None) -> Steps[Any]:
    """The one value a probe finds, or None when it finds no row."""
    row = yield from one(sql, params)
    return None if row is None else row[0]


def last_id(sql: str, params: Any = None) -> Steps[int]:
    return int((yield Statement(sql, params, Fetch.LAST_ID)))


def listed(steps: Steps[T]) -> Steps[list[T]]:
    """An operation whose one result is wanted as a list of one (an id, as ids)."""
    return [(yield from steps)]


def done(result: T) -> Steps[T]:
    """An operation that needs no statement (an empty batch): the result as it is."""
    return result
    yield  # a generator all the same, so that every operation is driven alike


def drive(steps: Steps[T], perform: Callable[[Step], Any]) -> T:
    """Run an operation with a blocking driver: `perform` runs one step and returns its answer."""
    answer = None
    try:
        while True:
            answer = perform(steps.send(answer))
    except StopIteration as finished:
        return finished.value  # type: ignore[no-any-return]


async def drive_async(steps: Steps[T], perform: Callable[[Step], Awaitable[Any]]) -> T:
    """Run an operation with an async driver: `perform` awaits one step's answer."""
    answer = None
    try:
        while True:
            answer = await perform(steps.send(answer))
    except StopIteration as finished:
        return finished.value  # type: ignore[no-any-return]


def fetched(cursor: Any, fetch: Fetch) -> Any:
    """A blocking DB-API cursor's answer to a statement it has run."""
    if fetch is Fetch.COUNT:
        return cursor.rowcount
    if fetch is Fetch.ONE:
        return cursor.fetchone()
    if fetch is Fetch.ALL:
        return cursor.fetchall()
    return cursor.lastrowid


async def fetched_async(cursor: Any, fetch: Fetch) -> Any:
    """An async driver's cursor's answer (psycopg, aiomysql and aiosqlite alike)."""
    if fetch is Fetch.COUNT:
        return cursor.rowcount
    if fetch is Fetch.ONE:
        return await cursor.fetchone()
    if fetch is Fetch.ALL:
        return await cursor.fetchall()
    return cursor.lastrowid
