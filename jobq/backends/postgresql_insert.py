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

from collections.abc import Sequence
from datetime import timedelta
from functools import cache
from operator import itemgetter
from typing import Any

import psycopg
from psycopg import sql

from .postgresql_controls import NOTIFY_CHANNEL

# {taken}: what a row whose unique_key is taken does (only rows with a key say anything, so
# plain rows keep a plain insert, without the speculative insertion of ON CONFLICT).
INSERT_ROWS = """
    WITH job AS (
        INSERT INTO jobq_jobs (type, class_name, payload, max_attempts, backoff, max_backoff,
            jitter, scheduled_at, deadline, priority, unique_key)
        SELECT type, class_name, payload, max_attempts, backoff, max_backoff, jitter,
            coalesce(scheduled_at, now() + make_interval(secs => delay)),
            coalesce(deadline, now() + make_interval(secs => deadline_in)), priority, unique_key
        FROM ROWS FROM (json_to_recordset(%(rows)s::json) AS (type text, class_name text,
            payload text, max_attempts int, backoff float8, max_backoff float8, jitter bool,
            scheduled_at timestamptz, delay float8, deadline timestamptz, deadline_in float8,
            priority smallint, unique_key text))
            WITH ORDINALITY AS new (type, class_name, payload, max_attempts, backoff,
                max_backoff, jitter, scheduled_at, delay, deadline, deadline_in, priority,
                unique_key, position)
        ORDER BY position
        {taken}
        RETURNING id, type
    )
    SELECT array_agg(id), (
        SELECT count(pg_notify(%(channel)s, type)) FROM (SELECT DISTINCT type FROM job) AS woken
    )
    FROM job
"""
INSERT = INSERT_ROWS.format(taken="")
INSERT_UNIQUE = INSERT_ROWS.format(taken="ON CONFLICT DO NOTHING")

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


def copy_in(connection: psycopg.Connection[Any], rows: Sequence[dict[str, Any]]) -> list[int]:
    """Write `rows` (Backend.insert_params of each job, which names the columns) in one
    COPY, in the connection's transaction; returns their ids in the order given."""
    columns = ["id", *(name for name in rows[0] if name not in RELATIVE)]
    params = {
        "rows": len(rows),
        "columns": columns,
        "channel": NOTIFY_CHANNEL,
        "types": list(dict.fromkeys(row["type"] for row in rows)),
    }
    with connection.cursor() as cursor:
        cursor.execute(RESERVE, params)
        reserved = cursor.fetchone()
        assert reserved is not None
        ids, now, column_types, _ = reserved
        if len(column_types) != len(columns):
            raise RuntimeError(f"jobq_jobs lacks one of the columns {columns}: is it up to date?")
        # Ascending, so that ids rise in the order given, as they do for an INSERT.
        ids.sort()
        values = itemgetter(*columns[1:])
        # Binary: a quarter of the client CPU of text for the same rows.
        statement = sql.SQL("COPY jobq_jobs ({}) FROM STDIN (FORMAT BINARY)").format(
            sql.SQL(", ").join(map(sql.Identifier, columns))
        )
        # Most calls give every job the same delay: one timedelta for all of them.
        later = cache(lambda seconds: now + timedelta(seconds=seconds))
        with cursor.copy(statement) as copy:
            copy.set_types(column_types)
            for job_id, row in zip(ids, rows, strict=True):
                for relative, column in RELATIVE.items():
                    if row[column] is None and row[relative] is not None:
                        row[column] = later(row[relative])
                copy.write_row((job_id, *values(row)))
    return list(ids)
