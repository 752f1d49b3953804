"""Bad input refused by the queue itself: a job type not every database can store."""

from __future__ import annotations

import pytest

import jobq
from tests.support.apps.chaos_app import Chaos


@pytest.mark.parametrize("name", ["nul\x00", "lone \ud800"], ids=["nul", "surrogate"])
def test_a_type_name_not_every_database_can_store_is_refused_at_enqueue(
    dsn: str, name: str
) -> None:
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        with pytest.raises(ValueError, match="a job type must be"):
            queue.enqueue(Chaos(0, "/dev/null"), type=name)
