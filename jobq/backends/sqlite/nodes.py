"""SQLite's heartbeat table (see backends/nodes.py): times are seconds since the epoch."""

from __future__ import annotations

from ..nodes import node_statements
from .schema import NOW

MIGRATION: tuple[str, ...] = (
    "CREATE TABLE jobq_nodes (id TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, "
    "version TEXT NOT NULL, started_at REAL NOT NULL, heard_at REAL NOT NULL, "
    "facts TEXT NOT NULL)",
)

NODES = node_statements(lambda name: f":{name}", NOW, lambda column: f"({NOW} - {column})")
