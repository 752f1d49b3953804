"""jobq's connections behind a real PgBouncer in transaction-pooling mode: wake-ups come over
a direct listen DSN or not at all, and bad pooling options are refused by name."""

from __future__ import annotations

import pytest

import jobq
from tests.support.jobs import Noop


def test_without_a_listen_dsn_idle_workers_poll(pooled_dsns: tuple[str, str]) -> None:
    pooled, _ = pooled_dsns
    with jobq.Queue.connect(pooled) as queue:
        assert queue.backend.listen() is False


def test_wake_ups_come_over_the_listen_dsn(pooled_dsns: tuple[str, str]) -> None:
    pooled, direct = pooled_dsns
    with (
        jobq.Queue.connect(pooled, listen_dsn=direct) as worker,
        jobq.Queue.connect(pooled) as producer,
    ):
        producer.install()
        assert worker.backend.listen() is True
        assert worker.backend.wait_for_jobs(0.05) is False
        producer.enqueue_many([Noop(), Noop()], type="a")
        assert worker.backend.wait_for_jobs(10.0) is True


@pytest.mark.parametrize(
    ("dsn", "listen_dsn", "message"),
    [
        ("postgresql://u@127.0.0.1:1/db?pool_mode=statement", None, "pool_mode in the DSN must"),
        ("sqlite:///jobq.sqlite3", "postgresql://u@127.0.0.1:1/db", "both DSNs must be"),
        ("postgresql://u@127.0.0.1:1/db", "mysql://u@127.0.0.1:1/db", "both DSNs must be"),
    ],
)
def test_bad_pooling_options_are_refused_by_name(
    dsn: str, listen_dsn: str | None, message: str
) -> None:
    with pytest.raises(jobq.ConfigurationError, match=message):
        jobq.Queue.connect(dsn, listen_dsn=listen_dsn)
