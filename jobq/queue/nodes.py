"""The supervisors as their heartbeat rows tell them (backends/nodes.py), for `jobq nodes`
and the status page: each node alive or silent, its pools, workers and their attempts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..backends.nodes import NodeRow

# A node is silent once its last heartbeat (every 5 s, supervisor/heartbeat.py) is this many
# seconds old: six missed beats, which a housekeeper restarted after a crash does not reach.
SILENT_AFTER = 30.0


@dataclass(frozen=True)
class RunningAttempt:
    job_id: int
    type: str
    lease_left: float  # seconds, by the master's reckoning when it was last heard from


@dataclass(frozen=True)
class NodeWorker:
    pid: int
    id: str
    pool: str
    state: str
    jobs: int  # attempts it ran to their end
    queued: int  # claimed with the one it runs (--prefetch), not started
    running: tuple[RunningAttempt, ...]


@dataclass(frozen=True)
class NodePool:
    name: str
    types: tuple[str, ...]  # empty: every type no other pool names
    workers: int
    concurrency: int


@dataclass(frozen=True)
class NodeSchedule:
    name: str
    spec: str
    type: str


@dataclass(frozen=True)
class NodeRecord:
    """A jobq-supervise as its last heartbeat told it."""

    id: str
    host: str
    pid: int
    version: str
    phase: str
    up_for: float  # seconds since its first heartbeat
    heard_ago: float  # seconds since its last
    silent: bool  # not heard from for longer than the silence threshold
    pools: tuple[NodePool, ...]
    workers: tuple[NodeWorker, ...]
    problems: tuple[str, ...]  # its helpers' failures, as its /healthz gives them
    schedules: tuple[NodeSchedule, ...] = ()  # those its housekeeper runs

    @property
    def state(self) -> str:
        """stopped (it said so as it stopped), silent, unhealthy (a helper is not running),
        or its master's phase: running, draining..."""
        if self.phase == "stopped":
            return "stopped"
        if self.silent:
            return "silent"
        return "unhealthy" if self.problems else self.phase

    def as_json(self) -> dict[str, Any]:
        """Stable keys, for `jobq nodes --json`."""
        return {
            "id": self.id,
            "host": self.host,
            "pid": self.pid,
            "version": self.version,
            "state": self.state,
            "phase": self.phase,
            "up_for": round(self.up_for, 3),
            "heard_ago": round(self.heard_ago, 3),
            "silent": self.silent,
            "healthy": not self.problems,
            "problems": list(self.problems),
            "pools": [vars(pool) | {"types": list(pool.types)} for pool in self.pools],
            "schedules": [vars(each) for each in self.schedules],
            "workers": [
                vars(worker) | {"running": [vars(each) for each in worker.running]}
                for worker in self.workers
            ],
        }


def node_record(row: NodeRow, silent_after: float) -> NodeRecord:
    """A row read back; a lease's time left is counted from when the node was heard."""
    facts = json.loads(row.facts)
    workers = tuple(
        NodeWorker(
            int(w["pid"]),
            str(w["id"]),
            str(w["pool"]),
            str(w["state"]),
            int(w["jobs"]),
            int(w["queued"]),
            tuple(
                RunningAttempt(int(a["id"]), str(a["type"]), float(a["lease_left"]) - row.heard_ago)
                for a in w["running"]
            ),
        )
        for w in facts["workers"]
    )
    pools = tuple(
        NodePool(str(p["name"]), tuple(p["types"]), int(p["workers"]), int(p["concurrency"]))
        for p in facts["pools"]
    )
    return NodeRecord(
        row.id,
        row.host,
        row.pid,
        row.version,
        str(facts["phase"]),
        row.up_for,
        row.heard_ago,
        row.heard_ago > silent_after,
        pools,
        workers,
        tuple(facts["helpers"]),
        tuple(
            NodeSchedule(str(each["name"]), str(each["spec"]), str(each["type"]))
            for each in facts.get("schedules", ())
        ),
    )


def check_silent_after(seconds: object) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise ValueError(f"silent_after must be a positive number of seconds, got {seconds!r}")
    return float(seconds)


def declared_types(nodes: list[NodeRecord]) -> dict[str, str]:
    """{schedule: the type it enqueues} as the nodes that are not silent declare them."""
    return {each.name: each.type for node in nodes if not node.silent for each in node.schedules}
