"""jobq's pytest plugin, registered by the `pytest11` entry point: the `jobq_queue` fixture,
a throwaway queue for each test (jobq.testing.queue): in-memory SQLite, or the database that
JOBQ_TEST_DSN names, the test's jobs deleted after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..queue import Queue
from .queues import queue


@pytest.fixture
def jobq_queue() -> Iterator[Queue]:
    with queue() as made:
        yield made
