"""Every failure jobq records as a message, not an exception, is named by a class of its own
(outcomes.UNRAISED), so that Django's TaskResult.errors can list it: the messages the
supervisor and the queue write, each held to the table."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from jobq import errors
from jobq.outcomes import (
    CANCELLED_WHILE_RUNNING,
    LEASE_EXPIRED,
    LEASE_EXPIRED_BEFORE_START,
    unraised_class,
)
from jobq.queue.suspending import SUSPENDED
from jobq.supervisor.settlement import STOP_CAUSES
from jobq.supervisor.states import StopReason
from jobq.supervisor.stopping import Stopper


def stop_cause(reason: StopReason) -> str:
    config = SimpleNamespace(job_timeout=5.0)
    return Stopper.stop_cause(SimpleNamespace(config=config), reason)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        (LEASE_EXPIRED, errors.LeaseExpired),
        (f"{SUSPENDED}: snoozed for 1 s", errors.Suspended),
        (LEASE_EXPIRED_BEFORE_START, errors.LeaseExpired),
        (CANCELLED_WHILE_RUNNING.format("it completed"), errors.JobCancelled),
        (STOP_CAUSES[None] + " (worker 7, SIGKILL)", errors.WorkerDied),
        (STOP_CAUSES[StopReason.JOB_TIMEOUT] + " after 5 s", errors.JobTimedOut),
        (STOP_CAUSES[StopReason.SHUTDOWN], errors.WorkerStopped),
        (STOP_CAUSES[StopReason.CANCELLED], errors.WorkerStopped),
        ("Its worker was stopped for job 3 (job_timeout)", errors.WorkerStopped),
        (stop_cause(StopReason.JOB_TIMEOUT), errors.JobTimedOut),
        (stop_cause(StopReason.CANCELLED), errors.JobCancelled),
        (stop_cause(StopReason.RENEWAL), errors.LeaseExpired),
        ("something else entirely", errors.AttemptEnded),
    ],
)
def test_each_message_jobq_writes_is_named_by_its_class(message: str, kind: type) -> None:
    assert unraised_class(message) == f"jobq.errors.{kind.__qualname__}"
    assert issubclass(kind, BaseException)


def test_every_stop_cause_is_named() -> None:
    for cause in STOP_CAUSES.values():
        assert unraised_class(cause) != "jobq.errors.AttemptEnded", cause
    for reason in StopReason:
        assert unraised_class(stop_cause(reason)) != "jobq.errors.AttemptEnded", reason
