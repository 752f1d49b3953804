"""An application that declares every kind of hook; each journals what it saw.

Loaded by workers as `hooks_app` (the tests put this folder on PYTHONPATH); HOOKS_JOURNAL
names the journal.
"""

from __future__ import annotations

import os
import threading

import jobq
from jobq.testing.history import journal_event


def write(event: str, **fields: object) -> None:
    thread = threading.current_thread().name
    journal_event(os.environ["HOOKS_JOURNAL"], event, thread=thread, **fields)


@jobq.on_worker_start
def started() -> None:
    write("worker_start")


@jobq.before_job
def before(claim: jobq.ClaimedJob) -> None:
    write("before", job=claim.id)
    if claim.type == "refused":
        raise PermissionError("this worker takes no refused jobs")


@jobq.after_job
def after(claim: jobq.ClaimedJob, outcome: jobq.Outcome) -> None:
    write("after", job=claim.id, outcome=str(outcome))
    if claim.type == "messy":
        raise RuntimeError("an after_job hook that fails")


class Step(jobq.Job):
    job_name = "Step"

    def handle(self) -> None:
        current = jobq.current_claim()
        assert current is not None
        write("handle", job=current.id)
