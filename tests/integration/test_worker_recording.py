"""A worker records an outcome its connection could not on a fresh connection (a database
failover): that connection is made as the worker's own are, and the outcome is recorded once."""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Iterator

import pytest

import jobq
from jobq import hooks
from jobq.errors import Unacknowledged
from jobq.worker.fence import FenceTable
from jobq.worker.mark import SettlingMark
from jobq.worker.recording import Recorder
from jobq.worker.reports import Reports
from jobq.worker.session import Session, close_quietly
from jobq.worker.settings import WorkerSettings
from jobq.worker.settling import SettlingReporter
from tests.support.jobs import Noop

# Short, so that a recorder that kept trying gives up within the test.
LEASE = 4.0

Seen = list[tuple[int, jobq.Outcome]]


@pytest.fixture
def after_job(monkeypatch: pytest.MonkeyPatch) -> Seen:
    """The application's after_job hook, as a worker finds it: what it was called with."""
    seen: Seen = []
    declared = hooks.JobHooks(after=[lambda claim, outcome: seen.append((claim.id, outcome))])
    monkeypatch.setattr(hooks, "REGISTERED", declared)
    return seen


@contextlib.contextmanager
def recorder(dsn: str, listen_dsn: str | None = None) -> Iterator[tuple[Recorder, Session]]:
    """A worker child's recorder, with its real reports, and a session whose connection just
    failed (closed under it)."""
    settings = WorkerSettings(
        dsn=dsn,
        lease=LEASE,
        types=(),
        poll_interval=1.0,
        safety_margin=1.0,
        max_jobs=None,
        max_memory_mib=None,
        listen_dsn=listen_dsn,
    )
    ours, master = socket.socketpair()
    slot = FenceTable(1).allocate()
    assert slot is not None
    mark = SettlingMark()
    failed = jobq.Queue.connect(dsn, lease_duration=LEASE)
    failed.close()
    session = Session(failed, notifying=False, first=[])
    try:
        yield Recorder(settings, Reports(ours, slot, mark), SettlingReporter(mark)), session
    finally:
        close_quietly(session.queue)
        ours.close()
        master.close()


def claimed(queue: jobq.Queue) -> jobq.ClaimedJob:
    queue.enqueue(Noop())
    claim = queue.claim()
    assert claim is not None
    return claim


def unacknowledged(claim: jobq.ClaimedJob) -> Unacknowledged:
    try:
        try:
            raise ConnectionError("server closed the connection unexpectedly")
        except ConnectionError as failure:
            raise Unacknowledged(claim, None) from failure
    except Unacknowledged as error:
        return error


@pytest.mark.lease(LEASE)
def test_an_outcome_recorded_anew_keeps_the_workers_hooks(
    queue: jobq.Queue, dsn: str, after_job: Seen
) -> None:
    claim = claimed(queue)
    with recorder(dsn) as (worker, session):
        outcome = worker.again_one(session, unacknowledged(claim))
        assert outcome is jobq.Outcome.COMPLETED
        # The skipped after_job ran, and the hooks stay for the jobs to come.
        assert after_job == [(claim.id, jobq.Outcome.COMPLETED)]
        assert session.queue.hooks is hooks.REGISTERED
    record = queue.get(claim.id)
    assert record is not None
    assert record.status is jobq.Status.COMPLETED


@pytest.mark.lease(LEASE)
def test_behind_pgbouncer_an_outcome_recorded_anew_keeps_the_wake_ups(
    pooled_dsns: tuple[str, str],
) -> None:
    pooled, direct = pooled_dsns
    with jobq.Queue.connect(direct, lease_duration=LEASE) as queue:
        queue.install()
        claim = claimed(queue)
        with recorder(pooled, listen_dsn=direct) as (worker, session):
            worker.again_one(session, unacknowledged(claim))
            assert session.notifying, "the worker went back to polling"
            assert session.queue._mark_idle()
            queue.enqueue(Noop())
            assert session.queue._wait_for_jobs(10), "no wake-up through listen_dsn"


@pytest.mark.databases("postgresql")
@pytest.mark.lease(LEASE)
def test_a_connection_lost_after_the_outcome_landed_records_it_once(
    queue: jobq.Queue, dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    claim = claimed(queue)
    recorded: list[bool] = []

    def record(fresh: jobq.Queue) -> bool:
        recorded.append(fresh.complete(claim))
        # The new connection ends right after the acknowledgement landed.
        pid = fresh.connection.info.backend_pid
        queue.backend.execute("SELECT pg_terminate_backend(%(pid)s)", {"pid": pid})
        return recorded[-1]

    with recorder(dsn) as (worker, session), caplog.at_level(logging.INFO):
        assert worker.again(session, [claim], None, record) is True
    assert recorded == [True], "the outcome was recorded more than once"
    assert "will run again" not in caplog.text


@pytest.mark.lease(LEASE)
def test_an_acknowledgement_that_landed_unseen_is_reported_completed(
    queue: jobq.Queue, dsn: str, after_job: Seen, caplog: pytest.LogCaptureFixture
) -> None:
    claim = claimed(queue)
    # It committed, and its reply was lost (the old primary crashed before sending it).
    assert queue.backend.complete(claim.id, claim.token)
    with recorder(dsn) as (worker, session), caplog.at_level(logging.INFO):
        assert worker.again_one(session, unacknowledged(claim)) is jobq.Outcome.COMPLETED
    assert after_job == [(claim.id, jobq.Outcome.COMPLETED)]
    assert "ownership lost" not in caplog.text


@pytest.mark.lease(LEASE)
def test_a_job_another_attempt_completed_is_still_lost(
    queue: jobq.Queue, dsn: str, after_job: Seen
) -> None:
    first = claimed(queue)
    # The same worker's next attempt at the job completed it: the first's is not that one.
    queue.backend.settle(first.id, first.token, jobq.Status.PENDING, "lease ended", 0, False)
    second = queue.claim()
    assert second is not None
    assert second.id == first.id
    assert queue.complete(second)
    with recorder(dsn) as (worker, session):
        assert worker.again_one(session, unacknowledged(first)) is jobq.Outcome.LOST
    assert after_job == [(first.id, jobq.Outcome.LOST)]
