"""The footprint section: roles from process titles, per-attempt memory, and the verdict."""

from __future__ import annotations

from ..harness.memory import MIB
from ..harness.results import Footprint, InFlight, NodeFootprint, Role
from .footprint import markdown, role_of, target


def test_a_role_is_read_from_the_process_title() -> None:
    assert role_of("jobq-supervise: master 8/8 workers [all types] running") == "master"
    assert role_of("jobq-supervise: fence keeper") == "fence keeper"
    assert role_of("jobq-supervise: worker job 12 (bench.Noop)") == "workers"
    assert role_of("jobq-supervise: worker idle") == "workers"
    assert role_of("postgres: checkpointer") is None


def test_an_idle_node_is_judged_on_its_summed_pss() -> None:
    roles = [Role("master", Footprint(1, 40 * MIB, 10 * MIB, 3 * MIB)),
             Role("workers", Footprint(8, 280 * MIB, 100 * MIB, 50 * MIB))]  # fmt: skip
    node = NodeFootprint(8, roles, 12)
    assert node.total == Footprint(9, 320 * MIB, 110 * MIB, 53 * MIB)
    assert target([node]) == [
        "- an idle node of --workers 8: summed PSS under 120 MiB: 110.0 MiB: **met**"
    ]
    assert target([NodeFootprint(2, roles, 12)]) == [], "judged at --workers 8 only"


def test_memory_per_attempt_is_the_workers_growth_over_the_attempts_running() -> None:
    flight = InFlight(100, 100, Footprint(1, 0, 0, 8 * MIB), Footprint(1, 0, 0, 9 * MIB))
    more = InFlight(200, 200, Footprint(1, 0, 0, 8 * MIB), Footprint(1, 0, 0, 10 * MIB))
    assert flight.per_attempt_uss == MIB / 100
    table = "\n".join(markdown([], [flight, more]))
    assert "| 100 | 100 | 8.0 | 9.0 | 10.2 | - |" in table
    assert "| 200 | 200 | 8.0 | 10.0 | 10.2 | 10.2 |" in table
    assert markdown([], []) == []
