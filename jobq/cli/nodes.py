"""What `jobq nodes` prints: the supervisors as their heartbeats tell them, for people or,
with --json, for scripts."""

from __future__ import annotations

import argparse
import json

from ..queue import Queue
from ..queue.nodes import SILENT_AFTER, NodeRecord
from .reports import roughly
from .terminal import escaped


def add_nodes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument(
        "--silent-after",
        type=float,
        default=SILENT_AFTER,
        metavar="SECONDS",
        help="call a node silent once its last heartbeat is this old "
        f"(default {SILENT_AFTER:g}; nodes beat every 5 s)",
    )


def cmd_nodes(queue: Queue, args: argparse.Namespace) -> int:
    found = queue.nodes(args.silent_after)
    if args.json:
        print(json.dumps([node.as_json() for node in found], indent=2))
        return 0
    if not found:
        print("No supervisor has written a heartbeat within the last hour.")
    for node in found:
        print("\n".join(described(node)))
    return 0


def described(node: NodeRecord) -> list[str]:
    """A node's lines: itself, its pools, its workers and what each runs, its helpers."""
    lines = [
        f"{escaped(node.host)} pid {node.pid}: {node.state}, jobq {escaped(node.version)}, "
        f"up {roughly(node.up_for)}, heard {roughly(node.heard_ago)} ago"
    ]
    for pool in node.pools:
        types = ",".join(pool.types) or "every other type"
        lines.append(
            f"  pool {escaped(pool.name)}: {pool.workers} worker(s) x {pool.concurrency}, "
            f"types {escaped(types)}"
        )
    for worker in node.workers:
        running = ", ".join(
            f"job {a.job_id} ({escaped(a.type)}, lease {roughly(max(a.lease_left, 0))} left)"
            for a in worker.running
        )
        lines.append(
            f"  worker {worker.pid} [{escaped(worker.pool)}] {worker.state}, "
            f"{worker.jobs} done" + (f": {running}" if running else "")
        )
    lines.append("  helpers: " + ("; ".join(map(escaped, node.problems)) or "all running"))
    return lines
