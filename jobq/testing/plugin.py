"""jobq's pytest plugin, registered by the `pytest11` entry point: the `jobq_queue` fixture,
a throwaway queue for each test (jobq.testing.queue): in-memory SQLite, or the database that
JOBQ_TEST_DSN names, the test's jobs deleted after it; and `jobq_async_queue`, its AsyncQueue
twin (jobq.testing.async_queue), an async fixture: pytest runs it through an async plugin's
runner, such as anyio's for a test marked `anyio`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from ..queue import Queue
from ..queue.asynchronous import AsyncQueue
from .queues import async_queue, queue


@pytest.fixture
def jobq_queue() -> Iterator[Queue]:
    with queue() as made:
        yield made


@pytest.fixture
async def jobq_async_queue() -> AsyncIterator[AsyncQueue]:
    async with async_queue() as made:
        yield made
