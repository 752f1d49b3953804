"""How rows get into PostgreSQL's jobs table: one INSERT for enqueue(), COPY for enqueue_many().

COPY takes rows at about twice the rate of any INSERT of many rows (JSON, arrays or VALUES;
measured at 100,000 jobs), because it skips the executor per row. It cannot return ids or
compute a column from now(), so one statement first reserves the ids from the table's
sequence, reads the transaction's now() (the same now() an INSERT in that transaction would
use) and sends the wake-ups; the rows then follow in one COPY, however many there are. Two
statements for the whole call, rather than one per chunk (the COPY waits for the server as it
starts and as it ends).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from functools import cache
from operator import itemgetter
from typing import Any

from psycopg import sql
from psycopg.pq import TransactionStatus

from ..rows import INSERT_NAMES
from ..steps import CopyRows, Steps, one
from .controls import NOTIFY_CHANNEL

# The ids of `rows` new rows, the transaction's now(), the types of the columns the COPY
# writes (a binary COPY must name them, and the table knows them), and one wake-up per job
# type. A NOTIFY is sent at commit, so a rolled-back enqueue wakes nobody. The sequence is
# looked up once in FROM: called per row, pg_get_serial_sequence took most of the time.
RESERVE = """
    SELECT array(SELECT nextval(seq)
                 FROM CAST(pg_get_serial_sequence('jobq_jobs', 'id') AS regclass) AS seq,
                      generate_series(1, %(rows)s)),
           now(),
           array(SELECT a.atttypid::int
                 FROM unnest(%(columns)s::text[]) WITH ORDINALITY AS c (name, position)
                 JOIN pg_attribute AS a
                   ON a.attrelid = 'jobq_jobs'::regclass AND a.attname = c.name
                 ORDER BY c.position),
           (SELECT count(pg_notify(%(channel)s, type)) FROM unnest(%(types)s::text[]) AS t (type))
"""

# The insert parameters given relative to now(), and the absolute column each one fills
# when that column is not given: a COPY stores values, never expressions.
RELATIVE = {"delay": "scheduled_at", "deadline_in": "deadline"}


def columns(names: Iterable[str]) -> list[str]:
    """The columns that the insert parameters `names` (Backend.insert_params) fill: every
    name but RELATIVE's, in order. Both enqueue()'s INSERT and enqueue_many()'s COPY write
    these, so a parameter added to insert_params reaches both."""
    return [name for name in names if name not in RELATIVE]


@cache
def insert_statement(names: tuple[str, ...], taken: str = "") -> str:
    """enqueue()'s INSERT of one row from the insert parameters `names`, and its wake-up
    (sent at commit, so a rolled-back enqueue wakes nobody). `taken`: what a row whose
    unique_key is taken does; only keyed rows say anything, so that plain rows keep a plain
    insert, without the speculative insertion of ON CONFLICT.

    Plain VALUES with one parameter a column: the one-row JSON recordset it replaced (the
    statement enqueue_many had before COPY) cost 57 against 42 us of statement time and
    75 against 50 us of client CPU per job, alternated on one server."""
    relative = {column: name for name, column in RELATIVE.items()}
    values = [
        f"coalesce(%({name})s::timestamptz, "
        f"now() + make_interval(secs => %({relative[name]})s::float8))"
        if name in relative
        else f"%({name})s"
        for name in columns(names)
    ]
    return f"""
        WITH job AS (
            INSERT INTO jobq_jobs ({", ".join(columns(names))}) VALUES ({", ".join(values)})
            {taken}
            RETURNING id, type
        )
        SELECT id, pg_notify(%(channel)s, type) FROM job
    """


# The columns the COPY writes, and where each insert parameter is in a row given.
WRITTEN = ["id", *columns(INSERT_NAMES)]
POSITION = {name: index for index, name in enumerate(INSERT_NAMES)}


def copy_steps(rows: Sequence[tuple[Any, ...]]) -> Steps[list[int]]:
    """Write `rows` (Backend.insert_values of each job) in one COPY, in the connection's
    transaction; returns their ids in the order given."""
    params = {
        "rows": len(rows),
        "columns": WRITTEN,
        "channel": NOTIFY_CHANNEL,
        "types": list(dict.fromkeys(row[POSITION["type"]] for row in rows)),
    }
    reserved = yield from one(RESERVE, params)
    assert reserved is not None
    ids, now, column_types, _ = reserved
    if len(column_types) != len(WRITTEN):
        raise RuntimeError(f"jobq_jobs lacks one of the columns {WRITTEN}: is it up to date?")
    # Ascending, so that ids rise in the order given, as they do for an INSERT.
    ids.sort()
    # Binary: a quarter of the client CPU of text for the same rows.
    statement = sql.SQL("COPY jobq_jobs ({}) FROM STDIN (FORMAT BINARY)").format(
        sql.SQL(", ").join(map(sql.Identifier, WRITTEN))
    )
    yield CopyRows(statement, column_types, written_rows(ids, now, rows))
    return list(ids)


def written_rows(
    ids: Sequence[int], now: datetime, rows: Sequence[tuple[Any, ...]]
) -> Iterator[list[Any]]:
    """The rows as the COPY writes them: each with its id, and with the absolute times that
    the relative parameters give from the transaction's now()."""
    values = itemgetter(*(POSITION[name] for name in WRITTEN[1:]))
    # Where each relative parameter is in a row given, and its column in a row written.
    fills = [(POSITION[name], WRITTEN.index(column)) for name, column in RELATIVE.items()]
    # Most calls give every job the same delay: one timedelta for all of them.
    later = cache(lambda seconds: now + timedelta(seconds=seconds))
    for job_id, row in zip(ids, rows, strict=True):
        out = [job_id, *values(row)]
        for relative, column in fills:
            if out[column] is None and row[relative] is not None:
                out[column] = later(row[relative])
        yield out


def outside_transaction(connection: Any) -> bool:
    """Whether each statement on this application's connection (sync or async) would commit
    alone: then statements that must land together (the ids, the wake-ups and the rows of
    enqueue_many) get a transaction of jobq's own. Inside the application's transaction
    they are simply part of it: a savepoint of jobq's would roll back part of it on error."""
    return bool(connection.autocommit) and (
        connection.info.transaction_status == TransactionStatus.IDLE
    )
