"""The heartbeat table on every database: a beat writes or refreshes its node's row, and
forgets every node not heard from for the retention, by the database's clock."""

from __future__ import annotations

import json

import jobq
from tests.integration.test_async_queue import run
from tests.support.waiting import wait_for

FACTS = json.dumps({"phase": "running", "pools": [], "workers": [], "helpers": []})


def test_a_beat_refreshes_its_row_and_forgets_nodes_silent_past_the_retention(
    queue: jobq.Queue,
) -> None:
    queue._beat("old:1:0", "old", 1, "0.1.0", FACTS, 3600.0)
    queue._beat("new:2:0", "new", 2, "0.1.0", FACTS, 3600.0)
    wait_for(
        "the old node's beat to be half a second old",
        lambda: [n for n in queue.nodes() if n.host == "old" and n.heard_ago > 0.5],
        timeout=10.0,
    )
    # The new node beats again, with a retention the old one's row has outlived.
    queue._beat("new:2:0", "new", 2, "0.1.0", FACTS, 0.5)
    (node,) = queue.nodes()
    assert (node.host, node.pid, node.version) == ("new", 2, "0.1.0")
    assert node.heard_ago < node.up_for  # its row was refreshed, not written anew
    assert not node.silent


def test_the_async_queue_reads_the_nodes_the_sync_queue_reads(queue: jobq.Queue, dsn: str) -> None:
    queue._beat("a:1:0", "a", 1, "0.1.0", FACTS, 3600.0)

    async def scenario(aqueue: jobq.AsyncQueue) -> None:
        (node,) = await aqueue.nodes()
        assert (node.id, node.host, node.state) == ("a:1:0", "a", "running")

    run(dsn, scenario)
