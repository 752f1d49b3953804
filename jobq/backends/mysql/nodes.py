"""MySQL's and MariaDB's heartbeat table (see backends/nodes.py)."""

from __future__ import annotations

from ..nodes import node_statements
from .schema import NOW

MIGRATION: tuple[str, ...] = (
    """
    CREATE TABLE IF NOT EXISTS jobq_nodes (
        id VARCHAR(255) NOT NULL PRIMARY KEY, host VARCHAR(255) NOT NULL, pid INT NOT NULL,
        version VARCHAR(64) NOT NULL, started_at DATETIME(6) NOT NULL,
        heard_at DATETIME(6) NOT NULL, facts LONGTEXT NOT NULL
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
    """,
)

NODES = node_statements(
    lambda name: f"%({name})s",
    NOW,
    lambda column: f"TIMESTAMPDIFF(MICROSECOND, {column}, {NOW}) / 1000000",
)
