"""Renewal rounds as the master schedules them: when the next one goes out, which one is in
flight, and which leases its answer extends. The renewer process runs them; the arithmetic
is lease_clock's."""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass

from .. import lease_clock, protocol
from ..lease_clock import Round
from .attempts import Attempt
from .config import SupervisorConfig
from .metrics import Metrics
from .workers import WorkerProcess

log = logging.getLogger("jobq")


@dataclass
class Missed:
    """An attempt a round did not extend, though its worker still held it when sent."""

    worker: WorkerProcess
    job_id: int
    token: str


@dataclass
class Answer:
    """A round's answer, applied: how many leases it extended, the attempts it missed, and
    the workers whose attempts an operator cancelled (their leases were extended: the
    master stops them through the fence, not by letting the lease run out)."""

    round: Round
    extended: int
    missed: list[Missed]
    cancelled: list[tuple[WorkerProcess, Attempt]]


class Renewals:
    def __init__(self, config: SupervisorConfig, metrics: Metrics) -> None:
        self.config = config
        self.metrics = metrics
        self.round: Round | None = None
        # The attempts whose starts the round in flight records.
        self.starting: set[int] = set()
        self.ids = itertools.count(1)
        self.cycle_start = 0.0  # when the current renewal cycle's first round was sent
        self.retrying = False
        self.next_round_at = 0.0

    def due(self) -> float:
        """When the round in flight times out, or else when the next one goes out."""
        if self.round is not None:
            return self.round.sent + self.config.renew_timeout
        return self.next_round_at

    def timed_out(self, now: float) -> bool:
        """Once due() has passed: whether that was the round in flight timing out, which
        then failed."""
        if self.round is None:
            return False
        log.warning(
            "Lease renewal timed out after %g s",
            self.config.renew_timeout,
            extra={"event": "renewal_timeout"},
        )
        self.failed(now)
        return True

    def start(
        self, now: float, held: dict[int, tuple[int, str]], started: dict[int, float]
    ) -> protocol.Renew | None:
        """The round to send now for the attempts `held` (job id -> (pid, token)), once
        due() has passed with no round in flight, recording the starts of `started` (see
        protocol.Renew); None when nothing is held."""
        if not self.retrying:
            self.cycle_start = now
        if not held:
            self.retrying = False
            self.next_round_at = now + self.config.renew_interval
            return None
        self.round = Round(next(self.ids), now, held)
        self.starting = set(started)
        claims = [(job, token) for job, (_, token) in held.items()]
        return protocol.Renew(self.round.id, claims, started)

    def failed(self, now: float) -> None:
        """The round in flight failed or timed out, or its renewer died."""
        if self.round is not None:
            self.metrics.renewals.labels("error").inc(len(self.round.claims))
        self.round = None
        self.next_round_at, self.retrying = lease_clock.next_round(
            now, self.cycle_start, self.config.renew_interval, False, self.retrying
        )

    def answered(
        self, result: protocol.Renewed, children: dict[int, WorkerProcess]
    ) -> Answer | None:
        """Apply an answer to the round in flight: extend the leases it kept. None if it
        failed, or answers a round already given up on."""
        done = self.round
        if done is None or result.round != done.id:
            return None
        if result.extended is None:
            log.warning("Lease renewal failed: %s", result.error, extra={"event": "renewal_error"})
            self.failed(time.monotonic())
            return None
        self.round = None
        self.next_round_at, self.retrying = lease_clock.next_round(
            time.monotonic(), self.cycle_start, self.config.renew_interval, True, self.retrying
        )
        extended = set(result.extended)
        missed: list[Missed] = []
        cancelled: list[tuple[WorkerProcess, Attempt]] = []
        for job_id, (pid, token) in done.claims.items():
            worker = children.get(pid)
            lease = None if worker is None else worker.holding(job_id, token)
            if worker is None or lease is None:
                continue  # it finished or released that attempt meanwhile
            if job_id in extended:
                lease.expires = lease_clock.extended(lease.expires, done.sent, self.config.lease)
                if job_id in self.starting:
                    lease.start_recorded = True
                # Only running attempts are fenced on: a queued one's extension is written
                # when it starts, a completed one runs no code. A cancelled queued job is
                # stopped by the round after it starts; the database keeps it cancelled.
                if lease.runs:
                    worker.vouch(lease)
                    if job_id in result.cancelled:
                        cancelled.append((worker, lease))
            else:
                missed.append(Missed(worker, job_id, token))
        return Answer(done, len(extended & done.claims.keys()), missed, cancelled)
