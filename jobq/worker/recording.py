"""Recording outcomes the session's connection could not: again on a fresh connection while
the attempts' leases are vouched for, or, past that, giving up on them (the master stops
renewing, the leases run out, and maintenance gives the jobs another attempt)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import NoReturn, TypeVar

from ..errors import Unacknowledged
from ..queue import Queue
from ..records import ClaimedJob, Outcome
from .reports import Reports
from .session import (
    FIRST_RECONNECT_WAIT,
    MAX_RECONNECT_WAIT,
    DatabaseLost,
    Session,
    close_quietly,
    connected,
    listening,
)
from .settings import WorkerSettings
from .settling import SettlingReporter

log = logging.getLogger("jobq")

# What a worker reports when it could not record an attempt's outcome.
UNACKNOWLEDGED = "unacknowledged"
Recorded = TypeVar("Recorded")


def described(claims: Sequence[ClaimedJob]) -> str:
    """Attempts as a log line names them: "attempt 2 of job 7; attempt 1 of job 8"."""
    return "; ".join(f"attempt {claim.attempt} of job {claim.id}" for claim in claims)


class Recorder:
    def __init__(
        self, settings: WorkerSettings, reports: Reports, reporter: SettlingReporter
    ) -> None:
        self.settings = settings
        self.reports = reports
        self.reporter = reporter

    def again_one(self, session: Session, unacknowledged: Unacknowledged) -> Outcome:
        """again() for one attempt, with the outcome its run found."""

        def record(queue: Queue) -> Outcome:
            return queue._acknowledge(unacknowledged)

        claim = unacknowledged.claim
        outcome = self.again(session, [claim], unacknowledged.__cause__, record)
        # The attempt's after_job hooks were skipped when its outcome could not be recorded.
        if session.queue.hooks is not None:
            session.queue.hooks.after_job(claim, outcome)
        return outcome

    def again(
        self,
        session: Session,
        claims: Sequence[ClaimedJob],
        error: BaseException | None,
        record: Callable[[Queue], Recorded],
    ) -> Recorded:
        """Record outcomes the session's connection could not (`record` does, given a
        queue), on a fresh connection, for as long as the attempts' leases are vouched for;
        the fresh connection then replaces the session's. After a database failover, the
        jobs need not run again in full.

        The fresh connection is made as the session's was (wake-ups, hooks). Once `record`
        succeeded it is never run again: a failure to listen on the new connection only
        leaves the worker polling."""
        delay, margin = FIRST_RECONNECT_WAIT, self.settings.safety_margin
        while (left := self.reports.vouched_until(claims, margin) - time.monotonic()) > 0:
            log.warning(
                "Could not record how %s ended (%s): trying on a new connection",
                described(claims),
                error,
                extra={"event": "ack_retry"},
            )
            queue: Queue | None = None
            try:
                queue = connected(self.settings, self.reporter)
                recorded = record(queue)
            except Exception as failure:
                close_quietly(queue)
                error = failure
                time.sleep(min(delay, left))
                delay = min(delay * 2, MAX_RECONNECT_WAIT)
                continue
            session.notifying = listening(queue)
            close_quietly(session.queue)
            session.queue = queue
            return recorded
        self.lost(claims, error)

    def lost(self, claims: Sequence[ClaimedJob], error: BaseException | None) -> NoReturn:
        """Give up on recording: report the attempts unacknowledged and stop this session."""
        # The master stops renewing the attempts, their leases run out, and maintenance gives
        # the jobs another one.
        self.reports.ended([(claim, UNACKNOWLEDGED) for claim in claims])
        raise DatabaseLost(
            f"Could not record how {described(claims)} ended, so the job will run again after "
            "its lease"
        ) from error
