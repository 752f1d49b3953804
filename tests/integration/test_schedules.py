"""Periodic jobs on each database: each slot taken exactly once, by the database's clock,
through the guard row. `now=` replays moments, so these need no waiting."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

import jobq
from jobq.schedules import Periodic, periodic
from jobq.schedules.scheduler import Slot, Tick
from tests.support.jobs import Noop
from tests.support.waiting import wait_for

# In the past, so that the jobs of replayed slots are ready to claim.
T0 = datetime(2026, 1, 5, 8, 0, 0, tzinfo=UTC)


def every(seconds: float, overlap: bool = True, catch_up: bool = True, name: str = "s") -> Periodic:
    return periodic(name, Noop(), None, "UTC", seconds, None, None, 0, overlap, catch_up)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


pytestmark = pytest.mark.lease(60)


def outcomes(tick: Tick) -> list[Slot]:
    return [outcome for _, outcome, _ in tick.taken]


def scheduled(queue: jobq.Queue, job_id: int | None) -> datetime:
    assert job_id is not None
    record = queue.get(job_id)
    assert record is not None
    return record.scheduled_at


def test_a_new_schedule_starts_at_its_next_slot_and_takes_each_once(queue: jobq.Queue) -> None:
    schedule = [every(60)]
    assert queue.run_schedules(schedule, now=at(30)).taken == []  # first sight: 08:00 passed
    assert queue.run_schedules(schedule, now=at(59)).taken == []
    tick = queue.run_schedules(schedule, now=at(60.2))
    assert outcomes(tick) == [Slot.ENQUEUED]
    assert scheduled(queue, tick.taken[0][2]) == at(60)
    assert tick.next_slot == at(120)
    assert queue.run_schedules(schedule, now=at(61)).taken == []
    assert queue.counts() == {"pending": 1}


def test_many_processes_at_one_slot_enqueue_it_once(queue: jobq.Queue, dsn: str) -> None:
    schedule = [every(1)]
    queue.run_schedules(schedule, now=at(0))
    start = threading.Barrier(6)
    ticks: list[Tick] = []

    def look() -> None:
        with jobq.Queue.connect(dsn) as own:
            start.wait(timeout=30)
            ticks.append(own.run_schedules(schedule, now=at(1.5)))

    threads = [threading.Thread(target=look) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(len(tick.taken) for tick in ticks) == [0, 0, 0, 0, 0, 1]
    assert queue.counts() == {"pending": 1}


def test_after_downtime_only_the_latest_missed_slot_runs(queue: jobq.Queue) -> None:
    schedule = [every(10)]
    queue.run_schedules(schedule, now=at(0))
    tick = queue.run_schedules(schedule, now=at(3600 + 4))  # 360 slots missed
    assert outcomes(tick) == [Slot.ENQUEUED]
    assert scheduled(queue, tick.taken[0][2]) == at(3600)


def test_a_late_look_still_takes_every_slot_that_is_on_time(queue: jobq.Queue) -> None:
    schedule = [every(1)]
    queue.run_schedules(schedule, now=at(0))
    tick = queue.run_schedules(schedule, now=at(3.5))
    assert outcomes(tick) == [Slot.ENQUEUED] * 3
    assert [scheduled(queue, job_id) for _, _, job_id in tick.taken] == [at(1), at(2), at(3)]


def test_without_catch_up_a_missed_slot_is_skipped_and_counted(queue: jobq.Queue) -> None:
    schedule = [every(60, catch_up=False)]
    queue.run_schedules(schedule, now=at(0))
    assert outcomes(queue.run_schedules(schedule, now=at(3 * 60 + 30))) == [Slot.MISSED]
    assert queue.counts() == {}
    assert outcomes(queue.run_schedules(schedule, now=at(4 * 60 + 1))) == [Slot.ENQUEUED]


def test_a_slot_whose_previous_job_is_active_is_skipped_without_overlap(
    queue: jobq.Queue,
) -> None:
    schedule = [every(1, overlap=False)]
    queue.run_schedules(schedule, now=at(0))
    assert outcomes(queue.run_schedules(schedule, now=at(1))) == [Slot.ENQUEUED]
    assert outcomes(queue.run_schedules(schedule, now=at(2))) == [Slot.OVERLAP]  # pending
    claim = queue.claim()
    assert claim is not None
    assert outcomes(queue.run_schedules(schedule, now=at(3))) == [Slot.OVERLAP]  # running
    queue.complete(claim)
    assert outcomes(queue.run_schedules(schedule, now=at(4))) == [Slot.ENQUEUED]
    assert queue.counts() == {"completed": 1, "pending": 1}


def test_pruning_finished_jobs_never_brings_a_slot_back(queue: jobq.Queue) -> None:
    schedule = [every(60)]
    queue.run_schedules(schedule, now=at(0))
    queue.run_schedules(schedule, now=at(60))
    assert queue.process_jobs(10) == 1
    # finished_at < now: on SQLite's millisecond clock, not within the same millisecond.
    wait_for("the finished job pruned", lambda: queue.prune(0) == 1)
    assert queue.run_schedules(schedule, now=at(61)).taken == []
    assert queue.counts() == {}


def test_a_changed_interval_takes_effect_at_its_next_slot(queue: jobq.Queue) -> None:
    queue.run_schedules([every(3600)], now=at(0))
    # Changed to every minute at 08:30: its 08:30 slot is not run, 08:31 is.
    assert queue.run_schedules([every(60)], now=at(30 * 60 + 5)).taken == []
    assert outcomes(queue.run_schedules([every(60)], now=at(31 * 60))) == [Slot.ENQUEUED]


def test_a_schedule_removed_from_the_code_stops(queue: jobq.Queue) -> None:
    queue.run_schedules([every(1), every(1, name="other")], now=at(0))
    tick = queue.run_schedules([every(1, name="other")], now=at(1))
    assert [name for name, _, _ in tick.taken] == ["other"]
