"""Finding jobs by a filter (Queue.search): every condition, on every database, and the
window of ids a page reads, which ends and walks on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import jobq
import jobq.backends.search
from jobq import JobFilter
from tests.support.jobs import Boom, Limited, Record

NO_RETRY = jobq.RetryPolicy(max_attempts=1)


def ids(queue: jobq.Queue, wanted: JobFilter) -> list[int]:
    found = queue.search(wanted, limit=100)
    assert found.following is None
    return [record.id for record in found.records]


def test_a_payload_field_finds_the_jobs_whose_field_equals_it(queue: jobq.Queue) -> None:
    acme = queue.enqueue(Record({"customer": {"id": 42, "name": "ACME"}, "vip": True}))
    other = queue.enqueue(Record({"customer": {"id": 7, "name": "acme"}, "vip": False}))
    queue.enqueue(Record("not an object"))
    queue.enqueue(Record([1, 2]))

    assert ids(queue, JobFilter(path=("value", "customer", "id"), equals="42")) == [acme]
    assert ids(queue, JobFilter(path=("value", "customer", "name"), equals="ACME")) == [acme]
    assert ids(queue, JobFilter(path=("value", "vip"), equals="false")) == [other]
    assert ids(queue, JobFilter(path=("value", "missing"), equals="42")) == []


def test_error_text_finds_failed_jobs_in_any_case_and_takes_wildcards_literally(
    queue: jobq.Queue,
) -> None:
    gateway = queue.enqueue(Boom("Payment gateway said 503"), retry=NO_RETRY)
    percent = queue.enqueue(Boom("disk 100% full"), retry=NO_RETRY)
    queue.enqueue(Boom("disk 1000 full"), retry=NO_RETRY)
    assert queue.process_jobs(3) == 3

    assert ids(queue, JobFilter(error="GATEWAY said")) == [gateway]
    assert ids(queue, JobFilter(error="100% full")) == [percent]
    assert ids(queue, JobFilter(error="disk 100_ full")) == [], "_ is no wildcard"


def test_columns_and_times_narrow_the_search(queue: jobq.Queue) -> None:
    urgent = queue.enqueue(Record(1), priority=10, unique_key="nightly-report")
    queue.enqueue(Record(2))
    keyed = queue.enqueue(Limited("account-9"))
    later = datetime.now(UTC) + timedelta(hours=2)
    scheduled = queue.enqueue(Record(3), scheduled_at=later)

    assert ids(queue, JobFilter(priority=10)) == [urgent]
    assert ids(queue, JobFilter(unique_key="nightly-report")) == [urgent]
    assert ids(queue, JobFilter(concurrency_key="account-9")) == [keyed]
    assert ids(queue, JobFilter(scheduled_after=later - timedelta(minutes=1))) == [scheduled]
    hour_ago = datetime.now(UTC) - timedelta(hours=1)
    assert ids(queue, JobFilter(created_before=hour_ago)) == []
    assert ids(queue, JobFilter(type="record", created_after=hour_ago, priority=0)) == [
        scheduled,
        urgent + 1,
    ]
    assert ids(queue, JobFilter(status=jobq.Status.PENDING, finished_after=hour_ago)) == []


def test_a_search_reads_one_window_of_ids_and_says_where_the_next_begins(
    queue: jobq.Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobq.backends.search, "SEARCH_WINDOW", 10)
    made = queue.enqueue_many([Record({"n": n % 3}) for n in range(25)])
    wanted = JobFilter(path=("value", "n"), equals="0")
    expected = sorted((job_id for n, job_id in enumerate(made) if n % 3 == 0), reverse=True)

    seen: list[int] = []
    before: int | None = None
    pages = 0
    while True:
        found = queue.search(wanted, limit=100, before_id=before)
        pages += 1
        assert len(found.records) <= 4, "at most a window's matches"
        seen += [record.id for record in found.records]
        if found.following is None:
            break
        before = found.following
    assert seen == expected
    assert pages == 3

    first = queue.search(wanted, limit=2)
    assert first.following == first.records[-1].id, "a full page continues below its last"
    far = queue.search(wanted, limit=100, before_id=2**62)
    assert [record.id for record in far.records] == expected[:4], "a bound past the newest"


@pytest.mark.databases("sqlite")
def test_a_filter_that_can_be_no_jobs_is_refused_naming_what_is_wrong(
    queue: jobq.Queue,
) -> None:
    with pytest.raises(ValueError, match="keys joined by dots"):
        queue.search(JobFilter(path=("a'b",), equals="1"))
    with pytest.raises(ValueError, match="both a field and the value"):
        queue.search(JobFilter(path=("a",)))
    with pytest.raises(ValueError, match="priority must be from"):
        queue.search(JobFilter(priority=5000))
