"""jobq's connections behind a real PgBouncer in transaction-pooling mode: wake-ups come over
a direct listen DSN or not at all, and bad pooling options are refused by name."""

from __future__ import annotations

import logging

import pytest
from psycopg import sql

import jobq
from jobq.backends.postgresql import pooler
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
        assert worker.backend.mark_idle()
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


def acknowledged_in_turn(queues: list[jobq.Queue], rounds: int) -> None:
    """Each queue in turn enqueues, claims and completes a job, `rounds` times: every
    statement runs often enough for psycopg to prepare it, and the turns hand the pooler's
    server connections from one client to the other."""
    for _ in range(rounds):
        for queue in queues:
            queue.enqueue(Noop())
            claim = queue.claim()
            assert claim is not None
            assert queue.complete(claim) is True


@pytest.fixture
def untold(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a fresh process: jobq has told nobody of a pooler yet."""
    monkeypatch.setattr(pooler, "told_of_pooler", False)


@pytest.mark.usefixtures("untold")
def test_a_dsn_without_pool_mode_loses_no_acknowledgement_through_the_pooler(
    pooled_dsns: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    pooled, direct = pooled_dsns
    unflagged = pooled.removesuffix("?pool_mode=transaction")
    with jobq.Queue.connect(direct) as setup:
        setup.install()
    with (
        caplog.at_level(logging.WARNING, logger="jobq"),
        jobq.Queue.connect(unflagged) as one,
        jobq.Queue.connect(unflagged) as other,
    ):
        acknowledged_in_turn([one, other], 10)
        assert one.counts() == {"completed": 20}
    hints = [r.getMessage() for r in caplog.records if "pool_mode=transaction" in r.getMessage()]
    assert len(hints) <= 1, hints
    assert hints, "nothing told the operator what the DSN lacks"


@pytest.mark.usefixtures("untold")
def test_a_prepared_statement_gone_from_the_server_is_sent_again_unprepared(
    postgresql_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """As when a pooler the connection did not recognise hands it another server
    connection: the acknowledgement that meets the missing statement still lands."""
    with jobq.Queue.connect(postgresql_dsn) as queue, caplog.at_level(logging.WARNING):
        queue.install()
        acknowledged_in_turn([queue], 6)
        names = queue.connection.execute("SELECT name FROM pg_prepared_statements").fetchall()
        assert names, "psycopg prepared nothing"
        for (name,) in names:
            queue.connection.execute(sql.SQL("DEALLOCATE {}").format(sql.Identifier(name)))
        acknowledged_in_turn([queue], 2)
        assert queue.counts() == {"completed": 8}
    assert "pooler_detected" in {getattr(r, "event", None) for r in caplog.records}
