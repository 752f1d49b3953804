"""A rate limit holds in the claim on every database: judged from the starts the database
recorded, no span of `per` seconds ever held more than `count` starts of one key (a sliding
window, so no double burst across a window's edge), a job over the rate waits without
counting an attempt, and an operator's override is read at claim time."""

from __future__ import annotations

import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import pytest

import jobq
from jobq.limits import RATE, rate_from_text
from tests.support.jobs import Noop, Rated

PER_KEY = {"v": 10, "w": 4}


# The issue's own measure: over 60 s, no span of `per` seconds holds more starts than
# allowed. A minute crosses sixty of Rated's one-second windows, with CLAIMERS connections
# racing for each key's slots at every edge, where a short run crosses three or four. It
# costs the suite a minute of one worker's wall time but little CPU (the claimers mostly
# wait for the window), so one database runs it; the others keep the short run.
LONG_RUN = {"postgresql": 60}
CLAIMERS = 4
# How long an idle claimer waits before it looks again: the window frees once a second.
IDLE = 0.1


def claim_all(dsn: str, timeout: float) -> None:
    """Claim and complete on a connection of its own until every job completed."""
    deadline = time.monotonic() + timeout
    with jobq.Queue.connect(dsn) as mine:
        while (claim := mine.claim()) is not None or unfinished(mine):
            assert time.monotonic() < deadline, f"jobs left after {timeout} s"
            if claim is None:
                time.sleep(IDLE)
            else:
                assert mine.complete(claim)


def unfinished(queue: jobq.Queue) -> int:
    return int(
        queue.backend.fetchone("SELECT count(*) FROM jobq_jobs WHERE status <> 'completed'")[0]
    )


def test_no_window_of_a_key_ever_holds_more_starts_than_its_rate(
    queue: jobq.Queue, dsn: str, db_kind: str
) -> None:
    count, per = Rated.rate.count, Rated.rate.per
    seconds = LONG_RUN.get(db_kind)
    # Long: enough jobs to keep each key at its rate for `seconds`.
    per_key = PER_KEY if seconds is None else dict.fromkeys(PER_KEY, int(seconds / per * count))
    claimers = 1 if seconds is None else CLAIMERS
    keys = {queue.enqueue(Rated(key, i)): key for key, n in per_key.items() for i in range(n)}
    ids = [*keys, queue.enqueue(Noop())]
    timeout = (seconds or 0) + 30
    with ThreadPoolExecutor(claimers) as pool:
        for done in [pool.submit(claim_all, dsn, timeout) for _ in range(claimers)]:
            done.result()
    starts: dict[str, list[datetime]] = defaultdict(list)
    for job_id in ids:
        record = queue.get(job_id)
        assert record is not None
        # Refused claims counted no attempt.
        assert record.attempts == 1, record
        if job_id in keys:
            assert record.attempted_at is not None
            starts[keys[job_id]].append(record.attempted_at)
    assert {key: len(found) for key, found in starts.items()} == per_key
    for key, found in starts.items():
        found.sort()
        # Any count + 1 starts in a row span at least `per` seconds.
        spans = [
            (later - earlier).total_seconds()
            for earlier, later in zip(found, found[count:], strict=False)
        ]
        assert min(spans) >= per, (key, spans)


def test_an_operator_s_rate_is_read_at_claim_time_and_listed(queue: jobq.Queue) -> None:
    ids = [queue.enqueue(Rated("v", i)) for i in range(3)]
    queue.set_rate("rated", (1, 60))
    first = queue.claim()
    assert first is not None
    assert queue.claim() is None
    later = queue.get(ids[1])
    assert later is not None
    assert later.attempts == 0
    # What `jobq show` prints: the rate holds the refused job back, not the running one.
    assert queue.waits_on(ids[1]) == (None, RATE)
    assert queue.waits_on(first.id) == (None, None)
    (row,) = [row for row in queue.limits() if row.name == RATE]
    assert (row.type, row.declared, row.override, row.per, row.in_use) == ("rated", 3, 1, 60, 1)
    queue.set_rate("rated", None)
    (row,) = [row for row in queue.limits() if row.name == RATE]
    assert (row.override, row.per) == (None, 1)
    # One start in the declared window of three: nothing holds the job back any more.
    assert queue.waits_on(ids[1]) == (None, None)


@pytest.mark.parametrize(
    ("text", "error"),
    [("10", "a rate is N/SECONDS"), ("10/x", "SECONDS must be a number"), ("0/5", "from 1"),
     ("5/0", "above 0")],
)  # fmt: skip
def test_a_bad_rate_is_refused_naming_the_fix(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        rate_from_text(text)
    with pytest.raises(ValueError, match="above 0"):
        jobq.Rate(3, per=-1)
