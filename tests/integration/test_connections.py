"""What `connection=` and Queue.from_connection take: a driver's connection, an ORM's wrapper
of one (see test_django.py), never None; and a closed one is called closed."""

from __future__ import annotations

import pytest

import jobq
from tests.support import drivers
from tests.support.jobs import Noop

pytestmark = pytest.mark.lease(60)


@pytest.mark.databases("sqlite")
def test_an_explicit_connection_none_is_refused_not_taken_for_the_queues_own(
    queue: jobq.Queue,
) -> None:
    with pytest.raises(TypeError, match=r"connection=None: pass the application's connection"):
        queue.enqueue(Noop(), connection=None)
    with pytest.raises(TypeError, match=r"connection=None"):
        jobq.Queue.from_connection(None)
    assert queue.counts() == {}


def test_a_closed_connection_is_reported_as_closed(
    queue: jobq.Queue, dsn: str, db_kind: str
) -> None:
    app = drivers.connect(dsn, db_kind, autocommit=True)
    borrowed = jobq.Queue.from_connection(app)
    app.close()
    with pytest.raises(RuntimeError, match=r"connection is closed"):
        borrowed.claim()
