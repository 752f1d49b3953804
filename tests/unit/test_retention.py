"""The retention options read durations as the issue's operators write them, refuse what
would prune a job before a Queue.wait saw it end, and set how often the cleaner runs."""

from __future__ import annotations

import argparse
import math

import pytest

from jobq.options import BY_NAME, MIN_RETENTION, shown_duration
from jobq.queue.retention import Retention
from jobq.queue.waiting import MAX_POLL
from jobq.records import Status

COMPLETED = BY_NAME["retain_completed"]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("90s", 90.0), ("15m", 900.0), ("12h", 43200.0), ("7d", 604800.0),
     ("1.5h", 5400.0), ("forever", math.inf), (" Forever ", math.inf)],
)  # fmt: skip
def test_a_retention_reads_durations_with_their_unit_or_forever(text: str, seconds: float) -> None:
    assert COMPLETED.read(text) == seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2s", "must be at least 4 s, got 2"),
        ("a day", "not a duration: 'a day'; give one like 90s, 15m, 12h, 7d or forever"),
        ("-5m", "not a duration"),
        ("99999d", "must be at most"),
    ],
)
def test_a_bad_retention_is_refused_with_the_fix(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        COMPLETED.read(text)


def test_the_shortest_retention_outlives_a_waits_pause_between_reads_twice() -> None:
    assert MIN_RETENTION >= 2 * MAX_POLL


def test_a_bad_retention_flag_names_the_flag() -> None:
    parser = argparse.ArgumentParser(exit_on_error=False)
    COMPLETED.add_to(parser)
    with pytest.raises(argparse.ArgumentError, match="--retain-completed"):
        parser.parse_args(["--retain-completed", "soon"])


def test_durations_are_shown_in_their_largest_whole_unit() -> None:
    assert [shown_duration(s) for s in (86400, 604800, 5400, 4.5, math.inf)] == [
        "1d", "7d", "90m", "4.5s", "forever",
    ]  # fmt: skip


def test_the_cleaner_runs_at_every_maintenance_run_unless_nothing_is_pruned() -> None:
    assert Retention().interval(10.0) == 10.0
    assert Retention(completed=4.0, failed=math.inf).interval(1.0) == 1.0
    assert Retention(completed=math.inf, failed=7200.0).interval(30.0) == 30.0
    assert Retention(completed=math.inf, failed=math.inf).interval(10.0) == math.inf


def test_forever_leaves_its_statuses_out_of_every_run() -> None:
    groups = Retention(completed=math.inf, failed=3600.0).groups()
    assert groups == [(3600.0, (Status.FAILED, Status.EXPIRED))]
