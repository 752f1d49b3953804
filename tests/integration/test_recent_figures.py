"""The status page's figures from indexes: completions per minute and recent counts, by the
database's clock, on every database."""

from __future__ import annotations

import pytest

import jobq
from tests.support.jobs import Boom, Noop

NO_RETRY = jobq.RetryPolicy(max_attempts=1)


def test_completed_jobs_count_in_the_minute_now_ending(queue: jobq.Queue) -> None:
    queue.enqueue_many([Noop() for _ in range(3)])
    queue.enqueue(Boom(), retry=NO_RETRY)
    queue.process_jobs(10)

    per_minute = queue.completions_per_minute(60)

    assert len(per_minute) == 60
    # A minute may just have turned between the last completion and the count.
    assert per_minute[-1] + per_minute[-2] == 3, "failed jobs do not count"
    assert sum(per_minute) == 3


def test_no_completions_is_a_row_of_zeros(queue: jobq.Queue) -> None:
    queue.enqueue(Noop())
    assert queue.completions_per_minute(5) == [0] * 5


def test_recent_counts_hold_every_unfinished_job_and_the_recently_finished(
    queue: jobq.Queue,
) -> None:
    queue.enqueue_many([Noop() for _ in range(4)])
    queue.process_jobs(2, type="noop")
    queue.enqueue(Boom(), retry=NO_RETRY)
    queue.process_jobs(1, type="boom")
    assert queue.claim("noop") is not None

    assert queue.recent_counts_by_type(60) == {
        "noop": {"pending": 1, "in_progress": 1, "completed": 2},
        "boom": {"failed": 1},
    }
    assert queue.recent_counts_by_type(60) == queue.counts_by_type(), "all finished just now"


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize("minutes", [0, -1, 1441, 2.5, True])
def test_the_window_is_a_whole_number_of_minutes_up_to_a_day(
    queue: jobq.Queue, minutes: object
) -> None:
    with pytest.raises(ValueError, match="minutes must be"):
        queue.completions_per_minute(minutes)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="minutes must be"):
        queue.recent_counts_by_type(minutes)  # type: ignore[arg-type]
