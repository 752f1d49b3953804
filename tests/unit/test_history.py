"""The history checker finds every kind of broken promise it is fed."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import jobq
from jobq.testing.history import check, read_journal

NOW = datetime.now(UTC)


def record(job: int, status: str, attempts: int = 1, max_attempts: int = 3) -> jobq.JobRecord:
    return jobq.JobRecord(
        id=job,
        type="t",
        class_name="C",
        payload="{}",
        status=jobq.Status(status),
        attempts=attempts,
        retry=jobq.RetryPolicy(max_attempts=max_attempts),
        last_error=None,
        scheduled_at=NOW,
        deadline=None,
        lease_until=None,
        created_at=NOW,
        updated_at=NOW,
        finished_at=None,
    )


def run(job: int, attempt: int, pid: int, start: float, end: float | None) -> list[dict[str, Any]]:
    events = [{"event": "start", "job": job, "attempt": attempt, "pid": pid, "mono": start}]
    if end is not None:
        events.append({"event": "end", "job": job, "attempt": attempt, "pid": pid, "mono": end})
    return events


def test_a_clean_history_passes() -> None:
    entries = run(1, 1, 10, 0.0, 5.0) + run(1, 2, 11, 5.5, 9.0) + run(2, 1, 10, 6.0, 7.0)
    report = check(entries, [record(1, "completed", 2), record(2, "completed")])
    assert report.ok, report.summary()
    assert (report.jobs, report.attempts_run, report.attempts_counted) == (2, 3, 3)


def test_overlapping_attempts_are_reported() -> None:
    entries = run(1, 1, 10, 0.0, 8.0) + run(1, 2, 11, 6.0, 14.0)
    report = check(entries, [record(1, "failed", 2, max_attempts=2)])
    assert not report.ok
    ((first, second),) = report.overlaps
    assert (first.attempt, second.attempt) == (1, 2)
    assert "overlaps: 1" in report.summary()


def test_an_attempt_with_no_known_end_overlaps_what_follows() -> None:
    entries = run(1, 1, 10, 0.0, None) + run(1, 2, 11, 7.0, 9.0)
    assert len(check(entries, [record(1, "completed", 2)]).overlaps) == 1


def test_a_killed_attempt_ends_when_its_process_was_seen_gone() -> None:
    entries = run(1, 1, 10, 0.0, None) + run(1, 2, 11, 7.0, 9.0)
    assert check(entries, [record(1, "completed", 2)], exits={10: 5.0}).ok
    late = check(entries, [record(1, "completed", 2)], exits={10: 7.5})
    assert len(late.overlaps) == 1
    assert [a.attempt for a in late.unfinished] == [1]


def test_an_attempt_s_subprocess_counts_as_that_attempt() -> None:
    # The worker (pid 10) and the subprocess its job ran (pid 12) are one attempt: together
    # they overlap nothing, but the subprocess outliving the worker into attempt 2 does.
    worker, subprocess, retry = (
        run(1, 1, 10, 0.0, None),
        run(1, 1, 12, 0.5, None),
        run(1, 2, 11, 7.0, 9.0),
    )
    entries = worker + subprocess + retry
    assert check(entries, [record(1, "completed", 2)], exits={10: 5.0, 12: 6.0}).ok
    late = check(entries, [record(1, "completed", 2)], exits={10: 5.0, 12: 8.0})
    ((first, second),) = late.overlaps
    assert (first.pid, second.pid) == (12, 11)


@pytest.mark.parametrize(
    "final",
    [
        record(1, "pending"),
        record(1, "in_progress"),
        record(1, "failed", attempts=1, max_attempts=3),
    ],
)
def test_jobs_not_settled_by_their_policy_are_lost(final: jobq.JobRecord) -> None:
    report = check(run(1, 1, 10, 0.0, 1.0), [final])
    assert report.lost == [1]
    assert not report.ok


def test_failed_with_attempts_used_up_and_expired_jobs_are_settled() -> None:
    records = [record(1, "failed", 3, max_attempts=3), record(2, "expired", 0)]
    assert check([], records).ok


def test_a_torn_last_line_is_ignored(tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    journal.write_text('{"event": "start", "job": 1, "attempt": 1, "pid": 1, "mono": 0}\n{"ev')
    assert len(read_journal(journal)) == 1
    assert read_journal(tmp_path / "missing") == []


def keyed(job: int, pid: int, start: float, end: float | None, key: str) -> list[dict[str, Any]]:
    events = run(job, 1, pid, start, end)
    for event in events:
        event["key"] = key
    return events


def test_more_attempts_of_one_key_at_once_than_its_limit_are_reported() -> None:
    entries = [
        *keyed(1, 10, 0.0, 2.0, "a"),
        *keyed(2, 11, 0.5, 1.0, "a"),
        *keyed(3, 12, 0.8, 3.0, "a"),  # the third of key a while 1 and 2 run
        *keyed(4, 13, 0.6, 1.5, "b"),
    ]
    records = [record(job, "completed") for job in (1, 2, 3, 4)]
    report = check(entries, records, limit=2)
    assert [(key, running) for key, _, running in report.crowded] == [("a", 3)]
    assert not report.ok
    assert check(entries, records, limit=3).ok


def test_a_slot_handed_on_at_one_instant_is_not_two_attempts_at_once() -> None:
    entries = [*keyed(1, 10, 0.0, 1.0, "a"), *keyed(2, 11, 1.0, 2.0, "a")]
    assert check(entries, [record(1, "completed"), record(2, "completed")], limit=1).ok


def test_an_attempt_killed_with_no_known_end_holds_its_slot_for_ever() -> None:
    entries = [*keyed(1, 10, 0.0, None, "a"), *keyed(2, 11, 5.0, 6.0, "a")]
    records = [record(1, "completed"), record(2, "completed")]
    assert not check(entries, records, limit=1).ok
    assert check(entries, records, {10: 4.0}, limit=1).ok
