"""MySQL and MariaDB's claim cursors: each connection's probes start their walk of a ready
index at the key of the first row its last walk found, as PostgreSQL's do
(postgresql/cursors.py, whose reasons and bound on order these are).

Why here too. While a transaction holds a consistent snapshot, InnoDB's purge may not remove
the ready indexes' delete-marked entries of the jobs claimed since, and a walk from the head
of the index steps over each of them, reading its pages: one claim read 40,097 buffer pool
pages after 20,000 jobs ran behind such a reader, against 2,052 with none
(tests/integration/test_held_horizon_mariadb_sqlite.py). MySQL has no session setting a
statement could keep a cursor in, so the connection's backend keeps it, in the client: it
is only where a walk starts, never what a claim may take.

The bound on order is PostgreSQL's: a walk from the head whenever the walk from the cursor
finds nothing, and at least every REWALK_SECONDS.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

# How long a connection's walks may start at its cursor before one walks from the head
# again: PostgreSQL's REWALK_SECONDS.
REWALK_SECONDS = 1.0

# From the cursor on in the ready indexes' order (priority descending, then schedule, then
# id): a range of the index for each branch.
FROM_CURSOR = """ AND (priority < %(at_priority)s OR (priority = %(at_priority)s
          AND (scheduled_at > %(at_scheduled)s
               OR (scheduled_at = %(at_scheduled)s AND id >= %(at_id)s))))"""

# Where a probe's row keeps its priority and schedule (claims.probe's columns).
PRIORITY, SCHEDULED = 14, 15


class ClaimCursors:
    """One connection's cursors, one per list of types claimed."""

    def __init__(self) -> None:
        self.kept: dict[tuple[str, ...], tuple[Any, Any, Any, float]] = {}
        # A connection may say otherwise, as PostgreSQL's sessions may (the tests do).
        self.rewalk_seconds = REWALK_SECONDS

    def walk(
        self,
        types: Sequence[str],
        fetch: Callable[[bool, dict[str, Any]], list[Any]],
    ) -> list[Any]:
        """The rows of one claim's probe: `fetch(from_cursor, params)` runs it, from the
        cursor's key in `params` when `from_cursor`, else from the head."""
        key = tuple(types)
        kept = self.kept.get(key)
        clock = time.monotonic()
        rows: list[Any] = []
        head_walk = kept[3] if kept else clock
        if kept is not None and clock - head_walk < self.rewalk_seconds:
            at = {"at_priority": kept[0], "at_scheduled": kept[1], "at_id": kept[2]}
            rows = fetch(True, at)
        if not rows:
            head_walk = clock
            rows = fetch(False, {})
        if rows:
            first = rows[0]
            self.kept[key] = (first[PRIORITY], first[SCHEDULED], first[0], head_walk)
        return rows
