"""The completions a drain's rate is read from, on the embedded SQLite database."""

from __future__ import annotations

from pathlib import Path

from .app import Noop
from .jobqdb import JobqDb

JOBS, EARLIEST = 5, 3


def test_a_rate_can_be_read_from_the_earliest_completions_only(tmp_path: Path) -> None:
    db = JobqDb(f"sqlite:///{tmp_path / 'jobs.db'}")
    try:
        db.preload(Noop(), JOBS)
        for _ in range(JOBS):
            claim = db.queue.claim()
            assert claim is not None
            assert db.queue.complete(claim)
        every, _, span_of_every, _ = db.completion()
        first, after_first, span_of_first, _ = db.completion(EARLIEST)
    finally:
        db.close()
    assert (every, first) == (JOBS, EARLIEST)
    assert after_first < EARLIEST
    assert span_of_first <= span_of_every
