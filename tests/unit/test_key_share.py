"""A worker's share of the limited work (worker/key_share.py), without processes or a
database: when it applies, how it is counted and how often."""

from __future__ import annotations

import jobq
from jobq.worker.key_share import REFRESH, KeyShare


class Synced(jobq.Job):
    job_name = "tests.key_share.Synced"
    type = "synced"
    concurrency = jobq.Concurrency(1, key=lambda job: "one")


class Plain(jobq.Job):
    job_name = "tests.key_share.Plain"
    type = "plain"


LIMITED = Synced.job_name
UNLIMITED = Plain.job_name


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Counts:
    """The limited work as the database would count it, and the bounds it was asked for."""

    def __init__(self, found: int) -> None:
        self.found = found
        self.asked: list[int] = []

    def __call__(self, most: int) -> int:
        self.asked.append(most)
        return self.found


def test_a_worker_whose_last_claim_was_all_limited_jobs_asks_for_its_share() -> None:
    share = KeyShare(8)
    counts = Counts(1000)
    assert share.share(counts, 1000) is None, "no claim yet"
    share.claimed([LIMITED, LIMITED])
    assert share.share(counts, 1000) == 125
    assert counts.asked == [8 * 1000], "each part counted up to what eight claims could take"
    assert KeyShare(3).share(Counts(10), 1000) is None
    three = KeyShare(3)
    three.claimed([LIMITED])
    assert three.share(Counts(10), 1000) == 4, "rounded up: the pool takes every key"


def test_a_claim_with_unlimited_jobs_leaves_the_size_to_the_prefetch_rule() -> None:
    share = KeyShare(8)
    share.claimed([LIMITED])
    share.claimed([LIMITED, UNLIMITED])
    assert share.share(Counts(1000), 1000) is None
    share.claimed([LIMITED])
    share.claimed([])
    assert share.share(Counts(1000), 1000) == 125, "an empty claim says nothing of the work"
    share.claimed(["tests.key_share.NotAnyClass"])
    assert share.share(Counts(1000), 1000) is None, "a class this worker does not know"


def test_the_work_is_counted_again_once_every_refresh() -> None:
    clock = Clock()
    share = KeyShare(4, clock)
    share.claimed([LIMITED])
    counts = Counts(40)
    assert share.share(counts, 10) == 10
    counts.found = 400
    clock.now += REFRESH / 2
    assert share.share(counts, 10) == 10
    clock.now += REFRESH / 2
    assert share.share(counts, 10) == 100
    assert len(counts.asked) == 2


def test_a_count_that_fails_leaves_the_last_one() -> None:
    clock = Clock()
    share = KeyShare(2, clock)
    share.claimed([LIMITED])
    assert share.share(Counts(30), 10) == 15

    def broken(most: int) -> int:
        raise ConnectionError("server closed the connection unexpectedly")

    clock.now += REFRESH
    assert share.share(broken, 10) == 15
    assert KeyShare(0).workers == 1
