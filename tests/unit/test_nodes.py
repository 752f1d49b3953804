"""A node's heartbeat row read back (queue/nodes.py) and the stored schedules' slots: what
`jobq nodes` and the Nodes page make of them, without a database."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from jobq.backends.nodes import NodeRow
from jobq.queue.nodes import check_silent_after, declared_types, node_record
from jobq.schedules import spec_slots

FACTS = {
    "phase": "running",
    "pools": [{"name": "email", "types": ["email"], "workers": 2, "concurrency": 4}],
    "workers": [
        {"pid": 7, "id": "w7", "pool": "email", "state": "busy", "jobs": 3, "queued": 0,
         "running": [{"id": 11, "type": "email", "lease_left": 50.0}]},
    ],
    "helpers": [],
    "schedules": [{"name": "nightly", "spec": "every 60s", "type": "email"}],
}  # fmt: skip


def row(heard_ago: float, **facts: object) -> NodeRow:
    return NodeRow("n:7:0", "node-a", 7, "0.1.0", json.dumps(FACTS | facts), 100.0, heard_ago)


def test_a_lease_s_time_left_counts_from_when_the_node_was_heard() -> None:
    node = node_record(row(heard_ago=8.0), silent_after=30.0)
    (worker,) = node.workers
    (attempt,) = worker.running
    assert (attempt.job_id, attempt.type, attempt.lease_left) == (11, "email", 42.0)
    assert node.pools[0].concurrency == 4
    assert node.state == "running"


@pytest.mark.parametrize(
    ("heard_ago", "facts", "state"),
    [
        (31.0, {}, "silent"),
        (1.0, {"helpers": ["the renewer is not running: it exited"]}, "unhealthy"),
        (1.0, {"phase": "draining"}, "draining"),
        (900.0, {"phase": "stopped"}, "stopped"),
    ],
)
def test_a_node_s_state(heard_ago: float, facts: dict[str, object], state: str) -> None:
    node = node_record(row(heard_ago, **facts), silent_after=30.0)
    assert node.state == state
    assert node.as_json()["state"] == state


def test_the_types_of_schedules_come_from_nodes_that_are_not_silent() -> None:
    alive = node_record(row(1.0), silent_after=30.0)
    silent = node_record(
        row(40.0, schedules=[{"name": "old", "spec": "every 1s", "type": "x"}]), 30.0
    )
    assert declared_types([alive, silent]) == {"nightly": "email"}


@pytest.mark.parametrize("bad", [0, -1, "5", True, float("nan")])
def test_a_silence_threshold_must_be_a_positive_number(bad: object) -> None:
    with pytest.raises(ValueError, match="silent_after must be a positive number of seconds"):
        check_silent_after(bad)


def test_a_stored_spec_gives_its_next_slot_and_an_unreadable_one_none() -> None:
    now = datetime(2026, 12, 8, 1, 2, 3, tzinfo=UTC)
    every = spec_slots("every 60s")
    cron = spec_slots("cron 30 2 * * * Europe/Berlin")
    assert every is not None
    assert cron is not None
    assert every.following(now) == datetime(2026, 12, 8, 1, 3, tzinfo=UTC)
    assert cron.following(now) == datetime(2026, 12, 8, 1, 30, tzinfo=UTC)
    assert spec_slots("lunar 3") is None
