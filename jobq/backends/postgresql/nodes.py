"""PostgreSQL's heartbeat table (see backends/nodes.py)."""

from __future__ import annotations

from ..nodes import node_statements

MIGRATION: tuple[str, ...] = (
    """
    CREATE TABLE jobq_nodes (
        id text PRIMARY KEY, host text NOT NULL, pid integer NOT NULL, version text NOT NULL,
        started_at timestamptz NOT NULL, heard_at timestamptz NOT NULL, facts text NOT NULL
    )
    """,
)

NODES = node_statements(
    lambda name: f"%({name})s", "now()", lambda column: f"extract(epoch FROM now() - {column})"
)
