"""Declaring schedules: what is refused when the application loads, and which slots a
schedule's cron or interval makes, across DST changes. No database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

import jobq
from jobq.schedules import Periodic, Schedules, periodic
from jobq.supervisor.metrics import Metrics
from tests.support.jobs import Noop

BERLIN = ZoneInfo("Europe/Berlin")


def declare(
    cron: str | None = None, every: float | timedelta | None = None, timezone: str = "UTC"
) -> Periodic:
    return periodic("s", Noop(), cron, timezone, every, None, None, 0, False, True)


def slots(schedule: Periodic, start: datetime, count: int) -> list[str]:
    """The next `count` slots after `start`, as Berlin wall-clock times with their offset."""
    found, moment = [], start
    for _ in range(count):
        moment = schedule.following(moment)
        found.append(moment.astimezone(BERLIN).isoformat())
    return found


def test_a_daily_time_in_the_hour_skipped_in_spring_runs_once_when_it_ends() -> None:
    nightly = declare("30 2 * * *", timezone="Europe/Berlin")
    # 2026-03-29: Berlin's clocks go from 02:00 straight to 03:00.
    start = datetime(2026, 3, 28, 12, 0, tzinfo=BERLIN)
    assert slots(nightly, start, 3) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
    ]


def test_a_daily_time_in_the_hour_repeated_in_autumn_runs_once() -> None:
    nightly = declare("30 2 * * *", timezone="Europe/Berlin")
    # 2026-10-25: Berlin's clocks go from 03:00 back to 02:00.
    start = datetime(2026, 10, 24, 12, 0, tzinfo=BERLIN)
    assert slots(nightly, start, 2) == ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]


def test_an_hourly_cron_runs_every_real_hour_across_both_changes() -> None:
    hourly = declare("0 * * * *", timezone="Europe/Berlin")
    spring = slots(hourly, datetime(2026, 3, 29, 0, 30, tzinfo=BERLIN), 3)
    assert spring == [
        "2026-03-29T01:00:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-29T04:00:00+02:00",
    ]
    autumn = slots(hourly, datetime(2026, 10, 25, 1, 30, tzinfo=BERLIN), 3)
    assert autumn == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:00:00+01:00",
        "2026-10-25T03:00:00+01:00",
    ]


def test_the_latest_slot_is_the_one_before_the_next_across_the_repeated_hour() -> None:
    hourly = declare("0 * * * *", timezone="Europe/Berlin")
    moment = datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 CEST, the first 02:xx
    latest = hourly.latest(moment)
    assert latest.astimezone(BERLIN).isoformat() == "2026-10-25T02:00:00+02:00"
    assert hourly.following(latest) == latest + timedelta(hours=1)
    assert hourly.latest(latest) == latest  # a slot is due at its own moment


def test_interval_slots_are_aligned_to_the_epoch_whatever_the_process() -> None:
    every = declare(every=timedelta(seconds=30))
    moment = datetime(2026, 12, 3, 7, 0, 44, 500_000, tzinfo=UTC)
    assert every.latest(moment) == datetime(2026, 12, 3, 7, 0, 30, tzinfo=UTC)
    assert every.following(moment) == datetime(2026, 12, 3, 7, 1, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"cron": "61 * * * *"}, "invalid cron '61 \\* \\* \\* \\*'"),
        ({"cron": "every day"}, "invalid cron"),
        ({"cron": "0 3 * * *", "timezone": "Europe/Atlantis"}, "unknown time zone"),
        ({"every": 0}, "every must be more than 0"),
        ({"every": -5}, "every must be more than 0"),
        ({"every": timedelta(0)}, "every must be more than 0"),
        ({"every": "soon"}, "every must be seconds or a timedelta"),
        ({"cron": "* * * * *", "every": 5}, "either cron= or every=, not both or neither"),
        ({}, "either cron= or every=, not both or neither"),
        ({"every": 5, "retry": 3}, "retry must be a jobq.RetryPolicy"),
    ],
)
def test_bad_declarations_are_refused_with_what_is_wrong(
    arguments: dict[str, object], message: str
) -> None:
    with pytest.raises(jobq.ConfigurationError, match=message):
        jobq.schedule("bad", Noop(), **arguments)  # type: ignore[arg-type]


def test_a_name_declared_twice_is_refused() -> None:
    registry = Schedules()
    registry.add(declare(every=5))
    with pytest.raises(
        jobq.ConfigurationError, match=r"\('s'\): a schedule of that name is already declared"
    ):
        registry.add(declare(cron="* * * * *"))


def test_a_changed_spec_is_a_different_spec() -> None:
    assert declare("0 3 * * *").spec != declare("0 3 * * *", timezone="Europe/Berlin").spec
    assert (
        declare(every=30).spec
        == declare(every=timedelta(seconds=30)).spec
        != declare(every=31).spec
    )


@pytest.mark.parametrize(
    "declared",
    [declare("30 2 * * 1-5", timezone="Europe/Berlin"), declare(every=30), declare(every=0.25)],
    ids=["cron", "every", "fraction"],
)
def test_another_processs_spec_is_read_back_into_its_slots(declared: Periodic) -> None:
    # What an older process reads of a newer one's spec, to see whether its slots are taken.
    other = declare(every=7).with_spec(declared.spec)
    assert other is not None
    assert other.spec == declared.spec
    start = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    assert other.following(start) == declared.following(start)


@pytest.mark.parametrize(
    "spec",
    [
        "hourly",
        "every soon",
        "cron * * * * * Nowhere/Atlantis",
        "cron 99 * * * * UTC",
    ],
)
def test_a_spec_this_jobq_cannot_read_is_none(spec: str) -> None:
    assert declare(every=7).with_spec(spec) is None


def test_the_supervisor_counts_slots_by_schedule_and_outcome() -> None:
    metrics = Metrics("sqlite", 60, 10)
    metrics.on_scheduled([("heartbeat", "skipped_overlap"), ("heartbeat", "skipped_overlap")])

    def value(outcome: str) -> float | None:
        labels = {"schedule": "heartbeat", "outcome": outcome}
        return metrics.registry.get_sample_value("jobq_schedule_slots_total", labels)

    assert (value("skipped_overlap"), value("enqueued"), value("skipped_missed")) == (2, 0, 0)
