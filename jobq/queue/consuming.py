"""Consuming: claim a job for one attempt, run it, and record how it ended, conditional on
the attempt's id and token; and renew the leases of attempts still running."""

from __future__ import annotations

import asyncio
import inspect
import logging
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from .. import tracing
from ..backends.base import Backend
from ..backends.leases import expiry
from ..backends.limits import past_refusals
from ..backends.rows import Refused, Renewal
from ..codec import Codec
from ..errors import Unacknowledged
from ..hooks import JobHooks
from ..job import Job, check_type_name
from ..listener import Listener
from ..outcomes import (
    CANCELLED_WHILE_RUNNING,
    FAILURE_OUTCOMES,
    LEASE_EXPIRED_BEFORE_START,
    describe,
    job_extra,
    next_step,
    printable,
)
from ..records import ClaimedJob, Outcome, Status
from ..results import encode_result, error_class
from . import maintenance
from .durable import Journal, journal
from .progress import flush
from .running import runner, running, running_on, worker_id
from .suspending import Suspend

log = logging.getLogger("jobq")

Types = str | Iterable[str] | None


def never() -> bool:
    return False


class Handling:
    """The frame around an attempt's code, in whichever thread or task runs it: there,
    current_claim() and cancel_requested() answer for this attempt, and its steps are
    journaled; begin() runs the
    before_job hooks; an Exception from the code is logged and kept as `error`, which fails
    the attempt; anything else (SystemExit, a task's CancelledError) goes through. The
    attempt's last progress is written as it leaves, before its outcome is."""

    def __init__(
        self, claim: ClaimedJob, backend: Backend, hooks: JobHooks | None, codec: Codec
    ) -> None:
        self.claim = claim
        self.backend = backend
        self.hooks = hooks
        self.codec = codec
        self.error: Exception | Suspend | None = None
        self.result: str | None = None

    def __enter__(self) -> Handling:
        self.tokens = running.set(self.claim), running_on.set(self.backend)
        self.journal = journal.set(Journal(self.claim, self.backend, self.codec))
        return self

    def begin(self) -> None:
        if self.hooks is not None:
            self.hooks.before_job(self.claim)

    def returned(self, value: object) -> None:
        """Keep what handle() returned, encoded: a value that cannot be stored raises here,
        inside the frame, and fails the attempt."""
        self.result = encode_result(self.codec, value)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: object
    ) -> bool:
        flush()
        journal.reset(self.journal)
        running.reset(self.tokens[0])
        running_on.reset(self.tokens[1])
        if isinstance(error, Suspend):
            # Kept as the attempt's end, as an error is, to be settled on the same paths.
            log.info(
                "Job %d: %s", self.claim.id, error.message, extra=job_extra(self.claim, "suspended")
            )
            self.error = error
            return True
        if not isinstance(error, Exception):
            return False
        claim = self.claim
        log.warning(
            "Job %d failed: %s", claim.id, printable(error), extra=job_extra(claim, "failed")
        )
        self.error = error
        return True


def outcome_of(error: BaseException | str, settled: Status | None) -> Outcome:
    """A failed attempt's outcome; a suspension's, which settles its job pending as a
    retry does, is told apart: it was not a failure."""
    if isinstance(error, Suspend) and settled is Status.PENDING:
        return Outcome.SUSPENDED
    return FAILURE_OUTCOMES[settled]


def type_list(types: Types) -> tuple[str, ...]:
    if types is None:
        return ()
    # Each type costs a claim one probe: a repeated one would only cost it twice.
    names = (types,) if isinstance(types, str) else tuple(dict.fromkeys(types))
    for name in names:
        check_type_name(name)
    return names


class Consuming:
    """The Queue's consumer side, needing only the settings below, which the Queue sets."""

    backend: Backend
    codec: Codec
    listener: Listener
    lease_duration: float
    hooks: JobHooks | None
    # The event loop an `async def handle` is sent to, from another thread, instead of one of
    # its own: jobq.testing's async drain sets the test's, where the connections the job
    # was given live.
    _coroutine_loop: asyncio.AbstractEventLoop | None = None

    def _consumer(self, operation: str) -> Backend:
        """The backend, once it is known to be fit for a consumer operation."""
        problem = self.backend.transaction_problem()
        if problem:
            raise RuntimeError(
                f"{operation} needs a connection in autocommit mode with no open transaction: "
                f"{problem}"
            )
        return self.backend

    def process_jobs(self, limit: int, type: Types = None) -> int:
        """Run maintenance once, then up to `limit` jobs one at a time; returns attempts run."""
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError(f"limit must be an int, got {limit!r}")
        if limit < 0:
            raise ValueError(f"limit must not be negative, got {limit}")
        if limit == 0:
            return 0
        types = type_list(type)
        maintenance.recover_and_expire(self._consumer("maintenance"))
        ran = 0
        claim = self.claim(types)
        while claim is not None:
            ran += 1
            _, claim = self.run_and_claim(claim, types, more=None if ran < limit else never)
            if claim is None and ran < limit:
                # A failed attempt claims nothing with its acknowledgement.
                claim = self.claim(types)
        return ran

    def process_next(self, type: Types = None) -> bool:
        """Claim and run one job, without maintenance; False when none was ready."""
        claim = self.claim(type)
        if claim is None:
            return False
        self.run(claim)
        return True

    def claim(self, type: Types = None) -> ClaimedJob | None:
        """Take one ready job for one attempt. No maintenance, no listener call."""
        backend = self._consumer("claim")
        types = type_list(type)
        token = secrets.token_hex(16)

        def attempt() -> ClaimedJob | Refused | None:
            lease = self.lease_duration
            return backend.claim(types, token, lease, expiry(lease), runner())

        claimed = backend.retrying("claim", lambda: past_refusals(attempt, None))
        if claimed is None and backend.retrying("claim", backend.wake_lapsed):
            claimed = backend.retrying("claim", lambda: past_refusals(attempt, None))
        return claimed

    def run(self, claim: ClaimedJob) -> Outcome:
        """Run a claimed job to its acknowledgement: decode, check the lease, handle, ack.
        Only decoding and handle() fail the attempt. A BaseException from handle() (SystemExit,
        KeyboardInterrupt) fails it too, then propagates.
        """
        return self.run_and_claim(claim, more=never)[0]

    def run_and_claim(
        self,
        claim: ClaimedJob,
        type: Types = None,
        more: Callable[[], bool] | None = None,
    ) -> tuple[Outcome, ClaimedJob | None]:
        """run(), and when the job completed, claim the next job of `type` in the same commit
        as the acknowledgement (see complete_and_claim); the outcome and the new claim, if
        any. `more`, if given, is asked once the job's code is done: False acknowledges alone."""
        outcome, next_claim, ended = self._attempt(claim, type_list(type), more)
        if self.hooks is not None:
            self.hooks.after_job(ended, outcome)
        return outcome, next_claim

    def _attempt(
        self, claim: ClaimedJob, types: tuple[str, ...], more: Callable[[], bool] | None
    ) -> tuple[Outcome, ClaimedJob | None, ClaimedJob]:
        """The attempt's outcome, the next claim, and the attempt as it ended (a completed
        one carries its result)."""
        ran = self._run_code(claim)
        if isinstance(ran, Outcome):
            return ran, None, claim
        claim = ran
        try:
            if more is None or more():
                outcome, next_claim = self._complete_and_claim(claim, types)
            else:
                outcome, next_claim = self._complete(claim), None
        except Exception as failure:
            raise Unacknowledged(claim, None) from failure
        self.listener.on_settled(claim, outcome)
        return outcome, next_claim, claim

    def _run_code(self, claim: ClaimedJob, began: float | None = None) -> Outcome | ClaimedJob:
        """Decode, check the lease and handle: the failure's outcome, acknowledged, or once
        the job's code completed, the claim carrying its encoded result, for the
        acknowledgement still to be made. A result that cannot be stored fails the attempt.
        All of it in the attempt's span, when tracing is on. `began`: see _settle_failure."""
        with tracing.processing(claim, worker_id()) as span:
            ran = self._run_traced(claim, span, began)
            span.ended(ran if isinstance(ran, Outcome) else None)
            return ran

    def _run_traced(
        self, claim: ClaimedJob, span: tracing.AttemptSpan, began: float | None
    ) -> Outcome | ClaimedJob:
        job = self._startable(claim)
        if not isinstance(job, Job):
            return self._failed(claim, job, span, began)
        try:
            handling = self._handled(claim, job)
        except BaseException as escaped:
            self._failed(claim, escaped, span, began)
            raise
        if handling.error is not None:
            return self._failed(claim, handling.error, span, began)
        self.listener.on_settling(claim)
        return claim.completed(handling.result)

    def _startable(self, claim: ClaimedJob) -> Job | Exception | str:
        """Decode the job and check its lease: the job to run, or why its attempt fails."""
        try:
            job = self.codec.decode(claim.class_name, claim.payload)
        except Exception as error:
            log.error("Could not decode job: %s", error, extra=job_extra(claim, "decode_failed"))
            return error
        log.info("Running job %d", claim.id, extra=job_extra(claim, "running"))
        self.listener.on_claimed(claim)
        if time.monotonic() >= claim.expires_monotonic:
            log.warning(LEASE_EXPIRED_BEFORE_START, extra=job_extra(claim, "lease_expired"))
            return LEASE_EXPIRED_BEFORE_START
        return job

    def _handled(self, claim: ClaimedJob, job: Job, backend: Backend | None = None) -> Handling:
        """The before_job hooks and handle(), its result kept or its error; an `async def
        handle` outside a concurrent worker runs, frame and all, on a loop of its own (or on
        _coroutine_loop, while this thread waits for it)."""
        if inspect.iscoroutinefunction(job.handle):
            awaited = self._awaited(claim, job, backend)
            if self._coroutine_loop is None:
                return asyncio.run(awaited)
            return asyncio.run_coroutine_threadsafe(awaited, self._coroutine_loop).result()
        with self._handling(claim, backend) as handling:
            handling.begin()
            handling.returned(job.handle())
        return handling

    async def _awaited(self, claim: ClaimedJob, job: Job, backend: Backend | None) -> Handling:
        """_handled for an `async def handle`: its frame's context is the awaiting task's."""
        with self._handling(claim, backend) as handling:
            handling.begin()
            handling.returned(await job.handle())
        return handling

    def _handling(self, claim: ClaimedJob, backend: Backend | None = None) -> Handling:
        """The frame of an attempt's code, sync or async: see Handling. Its progress and
        checkpoints are written through `backend` (the queue's own by default)."""
        return Handling(claim, backend or self.backend, self.hooks, self.codec)

    def _failed(
        self,
        claim: ClaimedJob,
        error: BaseException | str,
        span: tracing.AttemptSpan,
        began: float | None = None,
    ) -> Outcome:
        span.failed(error)
        self.listener.on_settling(claim)
        try:
            settled = self._settle_failure(claim, error, began)
        except Exception as failure:
            raise Unacknowledged(claim, error) from failure
        outcome = outcome_of(error, settled)
        self.listener.on_settled(claim, outcome)
        return outcome

    def _acknowledge(self, unacknowledged: Unacknowledged) -> Outcome:
        """Record, on this queue's connection, an outcome another connection could not."""
        claim, error = unacknowledged.claim, unacknowledged.error
        if error is None:
            outcome = self._complete(claim, sent_before=True)
        else:
            outcome = outcome_of(error, self._settle_failure(claim, error))
        self.listener.on_settled(claim, outcome)
        return outcome

    def complete(self, claim: ClaimedJob) -> bool:
        return self._complete(claim) is Outcome.COMPLETED

    def _complete(self, claim: ClaimedJob, sent_before: bool = False) -> Outcome:
        backend = self._consumer("complete")
        done = backend.retrying(
            "complete", lambda: backend.complete(claim.id, claim.token, claim.result)
        )
        return self._completed(claim, done, sent_before)

    def complete_and_claim(
        self, claim: ClaimedJob, type: Types = None
    ) -> tuple[bool, ClaimedJob | None]:
        """complete(), and claim the next job of `type` in the same commit: one round trip
        per job where the database takes both in one statement, one commit everywhere.
        Returns whether the completion applied, and the new claim (None: nothing was ready).
        If this raises, neither happened, or the outcome is unknown: the attempt's lease
        settles it, and a claim made unseen comes back after its own lease."""
        outcome, next_claim = self._complete_and_claim(claim, type_list(type))
        return outcome is Outcome.COMPLETED, next_claim

    def _complete_and_claim(
        self, claim: ClaimedJob, types: tuple[str, ...]
    ) -> tuple[Outcome, ClaimedJob | None]:
        backend = self._consumer("complete")
        token = secrets.token_hex(16)
        done, next_claim = backend.retrying(
            "complete",
            lambda: backend.complete_and_claim(
                claim.id, claim.token, types, token, self.lease_duration, runner(), claim.result
            ),
        )
        return self._completed(claim, done), next_claim

    def _completed(self, claim: ClaimedJob, done: bool, sent_before: bool = False) -> Outcome:
        """Log and tell the listener how a completion went. A completion refused because the
        job was cancelled as it ran ends the job cancelled: the cancel committed first. One
        `sent_before` on a connection that failed, and refused now because it had landed
        then (its reply lost in a failover), ends it completed."""
        landed = sent_before and self.backend.completed_by(claim.id, claim.attempt, runner().worker)
        if done or landed:
            log.info("Job %d completed", claim.id, extra=job_extra(claim, "completed"))
            self.listener.on_completed(claim)
            return Outcome.COMPLETED
        if self._end_cancelled(claim, "it completed, after the cancel"):
            return Outcome.CANCELLED
        self._ownership_lost(claim, "completion")
        return Outcome.LOST

    def _end_cancelled(self, claim: ClaimedJob, how: str) -> bool:
        """End an attempt whose acknowledgement was refused because an operator cancelled
        its job; False if the attempt had simply lost the job."""
        backend = self.backend
        error = CANCELLED_WHILE_RUNNING.format(how)
        ended = backend.retrying(
            "cancel", lambda: backend.end_cancelled(claim.id, claim.token, error)
        )
        if ended:
            log.info("Job %d cancelled", claim.id, extra=job_extra(claim, "cancelled"))
        return ended

    def fail(self, claim: ClaimedJob, error: BaseException | str) -> bool:
        """Record the attempt as failed; its retry policy decides whether the job runs again."""
        return self._settle_failure(claim, error) is not None

    def _settle_failure(
        self, claim: ClaimedJob, error: BaseException | str, began: float | None = None
    ) -> Status | None:
        """fail(), returning the job's new status (None when ownership was lost). `began`:
        the time.monotonic() reading as the attempt's code began, for one whose claim did
        not record its start (it waited in its worker's queue); its start is that."""
        backend = self._consumer("fail")
        suspended, for_event = isinstance(error, Suspend), getattr(error, "event", False)
        if isinstance(error, Suspend):
            # Not counted: settled by the same guarded statement as a retry, for later.
            status, delay, error = Status.PENDING, error.delay, error.message
            backend.retrying("suspend", lambda: backend.uncount(claim.id, claim.token))
        else:
            status, delay = next_step(claim.retry, claim.attempt)
        message, kind = describe(error), error_class(error)
        ago = None if began is None else time.monotonic() - began
        settled = backend.retrying(
            "fail",
            lambda: backend.settle(claim.id, claim.token, status, message, delay, False, kind, ago),
        )
        if settled is None and self._end_cancelled(claim, message):
            settled = Status.CANCELLED
        elif settled is None:
            self._ownership_lost(claim, "failure")
        elif for_event and settled is Status.PENDING:
            # An emit that came while the attempt was ending cleared the job's mark.
            backend.retrying("suspend", lambda: backend.rewake(claim.id))
        elif not suspended:
            self.listener.on_failed(claim, error)
        return settled

    def _ownership_lost(self, claim: ClaimedJob, before: str) -> None:
        log.warning(f"Job ownership lost before {before}", extra=job_extra(claim, "lost"))
        self.listener.on_ownership_lost(claim)

    def renew(self, claim: ClaimedJob) -> ClaimedJob | None:
        """Extend the lease to now + lease_duration; None once the lease ended or was taken."""
        backend = self._consumer("renew")

        def attempt() -> ClaimedJob | None:
            expires = expiry(self.lease_duration)
            until = backend.renew(claim.id, claim.token, self.lease_duration)
            return None if until is None else claim.renewed(until, expires)

        return backend.retrying("renew", attempt)

    def renew_many(self, claims: Sequence[tuple[int, str]]) -> set[int]:
        """Extend many attempts' leases in one statement; returns the ids still owned."""
        return self._renewal_round(claims).extended

    def _renewal_round(
        self, claims: Sequence[tuple[int, str]], started: Mapping[int, float] | None = None
    ) -> Renewal:
        """renew_many(), and which of the attempts it extended an operator cancelled.

        This is the supervisor's renewal round: the caller anchors its own deadlines at the
        moment it called, which the lease can only outlast.
        """
        backend = self._consumer("renew")
        if not claims:
            return Renewal(set(), set())
        lease = self.lease_duration
        return backend.retrying("renew", lambda: backend.renew_many(claims, lease, started or {}))
