"""Whether a failover could lose what this PostgreSQL server confirmed: it streams to standbys,
none of them synchronous, so a standby promoted after a crash may lack the last commits."""

from __future__ import annotations

from typing import Any

import psycopg

# pg_stat_replication lists every standby streaming from this server, to any role (the
# details are for privileged ones; the rows and their count are not).
SETTINGS = """
    SELECT current_setting('synchronous_commit'), current_setting('synchronous_standby_names'),
        (SELECT count(*) FROM pg_stat_replication)
"""
# synchronous_commit values that never wait for a standby.
LOCAL_ONLY = ("off", "local")


def failover_risk(connection: psycopg.Connection[Any]) -> str | None:
    """Why a promoted standby may lack commits this server confirmed, or None: no standby
    streams from it (a single server, or one whose replication the platform does below
    PostgreSQL), or the commits wait for a synchronous one."""
    row = connection.execute(SETTINGS).fetchone()
    assert row is not None
    commit, standby_names, standbys = row
    if not standbys:
        return None
    if not standby_names:
        names = "synchronous_standby_names is empty"
        return f"it streams to {standbys} standby(s), none of them synchronous ({names})"
    if commit in LOCAL_ONLY:
        return f"synchronous_commit is {commit}: commits do not wait for the synchronous standby"
    return None
