"""Exceptions that jobq raises on purpose, so callers can tell them from database errors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from .records import ClaimedJob


class JobqError(Exception):
    """Base class of jobq's own errors."""


class ConfigurationError(JobqError, ValueError):
    """A DSN, option or server setting that jobq cannot work with."""


class NoSchema(ConfigurationError):
    """The database lacks jobq's schema, or holds an older one: `jobq migrate` fixes it."""


class InstallLockTimeout(JobqError):
    """Another migration held the database's install lock for longer than a migration waits."""


class CommandError(JobqError):
    """A command line's failure already worded for the user, with any password taken out:
    printed as one line, and the command exits 1."""


class DecodeError(JobqError):
    """A payload that cannot become a registered Job: it fails the attempt, never the worker."""


class Unacknowledged(JobqError):
    """An attempt's outcome could not be recorded (the acknowledgement failed; its cause is
    chained). It may or may not have landed. Queue._acknowledge() records it again, with the
    attempt's own token, on another connection; the token makes a second landing harmless."""

    def __init__(self, claim: ClaimedJob, error: BaseException | str | None) -> None:
        super().__init__(f"could not record how attempt {claim.attempt} of job {claim.id} ended")
        self.claim = claim
        self.error = error  # the job's failure; None for a completion


class AttemptEnded(JobqError):
    """An attempt that ended without an exception of its own: jobq's record of it has only a
    message. Never raised; the subclasses name what happened where a failure must have an
    exception class (Django's TaskResult.errors), as outcomes.unraised_class() tells."""


class JobTimedOut(AttemptEnded):
    """The attempt ran past the supervisor's --job-timeout and was stopped."""


class LeaseExpired(AttemptEnded):
    """The attempt's lease ran out, or could not be renewed in time: jobq took the job back."""


class WorkerDied(AttemptEnded):
    """The worker running the attempt died (killed, crashed) before it could record it."""


class WorkerStopped(AttemptEnded):
    """The worker was stopped while the attempt ran: a shutdown, or another attempt's stop."""


class JobCancelled(AttemptEnded):
    """An operator cancelled the job while the attempt ran."""


class StepRefused(JobqError):
    """A durable step's record was refused: the attempt that ran it no longer holds its job
    (its lease ended, or another attempt has it). The attempt stops; the attempt that holds
    the job runs the step again, or has recorded it already."""


class DuplicateStep(JobqError, ValueError):
    """A step name used twice in one run of a job: each step needs a name of its own."""


class Suspended(AttemptEnded):
    """The attempt suspended its job (jobq.sleep(), jobq.snooze()): it ran again later, and
    the attempt did not count against its retry policy."""


class ChildFailure(NamedTuple):
    """A child of jobq.gather() that did not complete: its id, its status (failed,
    expired, cancelled, or deleted) and its last error."""

    job_id: int
    status: str
    error: str


class GatherFailed(JobqError):
    """jobq.gather(): some children did not complete. `failures` lists them
    (ChildFailure), `results` every child's result in order, None for those. A job may
    catch it; the children's outcome is recorded, so a later run raises it again there."""

    def __init__(self, failures: list[ChildFailure], results: list[Any]) -> None:
        ids = ", ".join(str(each.job_id) for each in failures)
        super().__init__(f"{len(failures)} of {len(results)} children did not complete: {ids}")
        self.failures = failures
        self.results = results


class EventTimeout(JobqError):
    """jobq.wait_for() saw no event of its key before its timeout. A job may catch it; the
    wait is recorded as timed out, so a later run of the job raises it again there."""
