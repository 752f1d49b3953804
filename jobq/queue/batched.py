"""Batched consuming: claim several ready jobs at once, each its own attempt with its own
token and lease; acknowledge the completed ones together with the next batch; and release
the claimed jobs that never started, back to pending at once and without counting an
attempt. jobq-supervise's workers use them for --prefetch (see worker/prefetch.py)."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Collection, Sequence

from ..backends.leases import expiry
from ..backends.limits import past_refusals
from ..backends.rows import Refused
from ..records import ClaimedJob, Claims, Outcome
from .consuming import Consuming, Types, type_list
from .running import runner

log = logging.getLogger("jobq")


def tokens(n: int, least: int) -> list[str]:
    """n fresh attempt tokens; n is checked here, where the caller's mistake is still theirs."""
    if not isinstance(n, int) or isinstance(n, bool) or n < least:
        raise ValueError(f"the number of jobs to claim must be an integer >= {least}, got {n!r}")
    return [secrets.token_hex(16) for _ in range(n)]


class BatchConsuming(Consuming):
    def claim_many(self, n: int, type: Types = None, queued: bool = False) -> Claims:
        """Claim up to `n` ready jobs of `type` in one statement, as claim() picks them:
        highest priority first, then schedule order, never of a paused type. Each is its own
        attempt, with its own token and lease; they come back in the order picked, in a list
        whose `refused` counts the rows a limit refused. They all start now, unless `queued`:
        then the first does, and each of the others once the one before it ended, its start
        recorded with its end (run_unacknowledged); till then it reads as claimed."""
        fresh = tokens(n, 1)
        types = type_list(type)
        backend = self._consumer("claim")
        lease = self.lease_duration

        def attempt() -> Claims | Refused:
            return backend.claim_many(types, fresh, lease, expiry(lease), runner(queued))

        # A batch a limit refused whole claims again at once, as claim() does (see
        # past_refusals); nothing ready: maybe a slot freed by an ended lease, with jobs
        # blocked on it.
        nothing = Claims()
        claimed = backend.retrying("claim", lambda: past_refusals(attempt, nothing))
        if not claimed and backend.retrying("claim", backend.wake_lapsed):
            claimed = backend.retrying("claim", lambda: past_refusals(attempt, nothing))
        return claimed

    def run_unacknowledged(self, claim: ClaimedJob) -> Outcome | ClaimedJob:
        """run(), except that a completed attempt is not acknowledged: its claim comes back,
        carrying its result, for complete_many_and_claim() to acknowledge with others. A
        failed attempt is acknowledged at once, as run() does, and its outcome returned.
        Either way the attempt carries when it began and ended, for the statement that
        records its end: after the first of a batch, an attempt starts unrecorded."""
        began = time.monotonic()
        ran = self._run_code(claim, began)
        if isinstance(ran, Outcome):
            if self.hooks is not None:
                self.hooks.after_job(claim, ran)
            return ran
        return ran.timed(began, time.monotonic())

    def complete_many_and_claim(
        self, claims: Sequence[ClaimedJob], n: int, type: Types = None, queued: bool = False
    ) -> tuple[list[Outcome], Claims]:
        """Complete every attempt of `claims` and claim up to `n` more jobs of `type`, in one
        commit (one statement where the database allows). Each completion is guarded by its
        own token. Returns each claim's outcome, in order (as complete() decides it: a job
        cancelled as it ran ends cancelled), and the new claims (with the count of rows a limit
        refused, as claim_many's, `queued` as there); n = 0 claims nothing."""
        fresh = tokens(n, 0)
        types = type_list(type)
        backend = self._consumer("complete")
        now = time.monotonic()
        done = [claim.acknowledged(now) for claim in claims]
        completed, next_claims = backend.retrying(
            "complete",
            lambda: backend.complete_many_and_claim(
                done, types, fresh, self.lease_duration, runner(queued)
            ),
        )
        return [self._completed(claim, claim.id in completed) for claim in claims], next_claims

    def release(self, claims: Sequence[tuple[int, str]]) -> set[int]:
        """Put claimed jobs whose attempt never started back to pending, ready at once, with
        the attempt not counted; each (id, token) only while that attempt still holds its
        job. Returns the ids released. A job an operator asked to cancel is not released:
        its lease ends it cancelled, as for any attempt."""
        backend = self._consumer("release")
        if not claims:
            return set()
        released = backend.retrying("release", lambda: backend.release(claims))
        if released:
            ids = ", ".join(map(str, sorted(released)))
            log.info("Released unstarted jobs %s", ids, extra={"event": "released"})
        return released

    def release_left_behind(self, worker: str, keep: Collection[int]) -> list[str]:
        """Put back to pending, uncounted, every attempt a dead worker incarnation still holds
        but those of `keep` (the one it ran): the claims it made, reported or not, that it
        never started. Each release is guarded by its attempt's token, so a job claimed again
        by another worker meanwhile is left alone. Returns the released jobs' types."""
        backend = self._consumer("release")
        held = backend.retrying("release", lambda: backend.held_by(worker))
        left = {job_id: (token, job_type) for job_id, token, job_type in held if job_id not in keep}
        released = self.release([(job_id, token) for job_id, (token, _) in left.items()])
        return [left[job_id][1] for job_id in sorted(released)]
