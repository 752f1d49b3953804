"""The supervisors' heartbeats: one row per running jobq-supervise in jobq_nodes, written by
its housekeeper every few seconds with what the master knows (its pools, workers and their
attempts, its helpers' health), read by `jobq nodes` and the status page's /nodes.

The row's times are the database's: a reader compares them with the database's clock, never
its own, so a node whose clock is off does not look silent. Each backend gives its clock and
how many seconds ago a stored time was; the statements are the same everywhere else."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from .steps import Steps, every

T = TypeVar("T")

# The columns a node's row is read by, in this order.
NODE_COLUMNS = "id, host, pid, version, facts"


@dataclass(frozen=True)
class NodeStatements:
    update: str
    insert: str
    forget: str
    read: str


def node_statements(
    mark: Callable[[str], str], now: str, ago: Callable[[str], str]
) -> NodeStatements:
    """The heartbeat's statements for a backend whose named parameter `name` is mark(name),
    whose clock reads `now`, and which tells the seconds since a stored time by ago(column)."""
    row_id, facts, retention = mark("id"), mark("facts"), mark("retention")
    return NodeStatements(
        update=f"UPDATE jobq_nodes SET heard_at = {now}, facts = {facts} WHERE id = {row_id}",
        insert=(
            "INSERT INTO jobq_nodes (id, host, pid, version, started_at, heard_at, facts) "
            f"VALUES ({row_id}, {mark('host')}, {mark('pid')}, {mark('version')}, {now}, "
            f"{now}, {facts})"
        ),
        forget=f"DELETE FROM jobq_nodes WHERE {ago('heard_at')} > {retention}",
        read=(
            f"SELECT {NODE_COLUMNS}, {ago('started_at')}, {ago('heard_at')} FROM jobq_nodes "
            "ORDER BY host, pid, id"
        ),
    )


@dataclass(frozen=True)
class NodeRow:
    """A node's row as stored: its facts are the JSON text the housekeeper wrote."""

    id: str
    host: str
    pid: int
    version: str
    facts: str
    up_for: float  # seconds since the node's first heartbeat, by the database's clock
    heard_ago: float  # seconds since its last


class Nodes:
    """The heartbeat table's reads and writes, as every backend provides them."""

    node_sql: ClassVar[NodeStatements]

    @abstractmethod
    def execute(self, sql: str, params: Any = None, connection: Any = None) -> int: ...

    @abstractmethod
    def fetchall(self, sql: str, params: Any = None) -> list[Any]: ...

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]: ...

    @abstractmethod
    def run(self, steps: Steps[T], connection: Any = None) -> T: ...

    def beat(
        self, node_id: str, host: str, pid: int, version: str, facts: str, retention: float
    ) -> None:
        """Record that this node is alive, with what it knows, and forget every node not
        heard from for `retention` seconds."""
        with self.transaction():
            given = {"id": node_id, "facts": facts}
            if self.execute(self.node_sql.update, given) == 0:
                row = {**given, "host": host, "pid": pid, "version": version}
                self.execute(self.node_sql.insert, row)
            self.execute(self.node_sql.forget, {"retention": retention})

    def nodes(self) -> list[NodeRow]:
        return self.run(self.nodes_steps())

    def nodes_steps(self) -> Steps[list[NodeRow]]:
        rows = yield from every(self.node_sql.read)
        return [
            NodeRow(str(i), str(h), int(p), str(v), str(f), float(up), float(ago))
            for i, h, p, v, f, up, ago in rows
        ]
