"""An attempt as the master sees it: one object whose state says where it is in its life, and
the only place that state changes. A worker's messages and its fence slot arrive in orders
the master does not choose (see protocol.py); every change goes through `Attempts.move`,
which refuses one the protocol cannot produce, so a mistake in reading them shows as an
error here rather than as a lease renewed or dropped in silence.

    start     CLAIMED -> RUNNING              its slot names it, or a message names it
    lose      CLAIMED -> LOST                 a renewal round did not extend it
    stop      RUNNING | STOPPING -> STOPPING  alone, or its whole worker for it
    settle    RUNNING | STOPPING | COMPLETED -> COMPLETED | UNRECORDED
    doubt     CLAIMED | RUNNING | STOPPING -> UNRECORDED   its worker died writing its slot
    release   CLAIMED | LOST -> ENDED
    finished  RUNNING | STOPPING | COMPLETED | UNRECORDED -> ENDED

COMPLETED and UNRECORDED are the two kinds of settling: the attempt's code is done and its
outcome is being recorded, by the master (a completion it can acknowledge for a dead worker)
or only by the worker (a failure, or a result too large to carry)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from .. import protocol
from ..records import ClaimedJob
from ..worker.fence import Hold, token_key
from .states import StopReason


class State(StrEnum):
    CLAIMED = "claimed"  # claimed behind the running one (--prefetch), not started
    RUNNING = "running"
    STOPPING = "stopping"  # running, told to stop: alone, or its worker for it
    COMPLETED = "completed"  # settling: completed, its acknowledgement not sent yet
    UNRECORDED = "unrecorded"  # settling: its end only the worker can record
    LOST = "lost"  # claimed, and a renewal round found its lease gone
    ENDED = "ended"  # the master no longer holds it


# The states each one may move to. A state may move to itself where a later message adds to
# what an earlier one or the slot said (a result for a completion read from the slot; a
# worker's stop for an attempt already stopped alone).
ALLOWED: dict[State, frozenset[State]] = {
    State.CLAIMED: frozenset({State.RUNNING, State.LOST, State.UNRECORDED, State.ENDED}),
    State.RUNNING: frozenset({State.STOPPING, State.COMPLETED, State.UNRECORDED, State.ENDED}),
    State.STOPPING: frozenset({State.STOPPING, State.COMPLETED, State.UNRECORDED, State.ENDED}),
    State.COMPLETED: frozenset({State.COMPLETED, State.UNRECORDED, State.ENDED}),
    State.UNRECORDED: frozenset({State.ENDED}),
    State.LOST: frozenset({State.ENDED}),
    State.ENDED: frozenset(),
}

RUNS = frozenset({State.RUNNING, State.STOPPING})  # its job's code may run
SETTLING = frozenset({State.COMPLETED, State.UNRECORDED})


class Refused(Exception):
    """A change of state the protocol cannot produce: a bug in reading it."""


@dataclass(eq=False)
class Attempt:
    """An attempt a worker holds, as the master renews, fences and stops it."""

    claim: ClaimedJob
    expires: float  # monotonic: the lease certainly lasts until then, never longer
    started: float  # monotonic: when the master learned the attempt started
    state: State = State.CLAIMED
    ended: float | None = None  # when its code was done, for one awaiting acknowledgement
    # Whether its start is recorded: by its claim, unless it was claimed behind others (a
    # queued attempt), then by the first renewal round after it started, or by its end.
    start_recorded: bool = True
    # Stopped alone (a concurrent worker's): why, and the moment its whole worker is killed
    # if it still runs then.
    stop_reason: StopReason | None = None
    kill_at: float | None = None
    # The whole worker's stop (WorkerProcess.stop_reason) is for this attempt: it is called
    # off once this attempt ends.
    stops_worker: bool = False
    order: int = 0  # its place among its worker's claims

    @property
    def runs(self) -> bool:
        return self.state in RUNS

    @property
    def alone(self) -> tuple[float, StopReason] | None:
        """When its worker is killed if it still runs then, and why, if it was stopped alone."""
        if self.state is not State.STOPPING or self.kill_at is None or self.stop_reason is None:
            return None
        return self.kill_at, self.stop_reason

    def named(self) -> protocol.Named:
        return self.claim.id, self.claim.token

    def held_as(self, pid: int) -> Hold:
        """This attempt as the fence table writes it."""
        return Hold(pid, self.claim.id, token_key(self.claim.token), self.expires)


@dataclass
class Attempts:
    """A worker's attempts by job id, and by state in the order each entered it (the order
    the master renews and acknowledges them in)."""

    by_id: dict[int, Attempt] = field(default_factory=dict)
    by_state: dict[State, dict[int, Attempt]] = field(
        default_factory=lambda: {state: {} for state in State if state is not State.ENDED}
    )
    orders: Iterator[int] = field(default_factory=itertools.count)

    def __len__(self) -> int:
        return len(self.by_id)

    def get(self, job_id: int) -> Attempt | None:
        return self.by_id.get(job_id)

    def of(self, state: State) -> dict[int, Attempt]:
        """Those in `state`, in the order they entered it: read, never change, this map."""
        return self.by_state[state]

    def running(self) -> dict[int, Attempt]:
        """Those whose code may run, in the order they were claimed."""
        running = [*self.by_state[State.RUNNING].values(), *self.by_state[State.STOPPING].values()]
        return {each.claim.id: each for each in sorted(running, key=lambda each: each.order)}

    # -- the transitions: each is the one way its change happens ----------------------------

    def claimed(self, claim: ClaimedJob, now: float, runs: bool) -> Attempt:
        """It claimed this attempt, to run now or after the ones before it."""
        attempt = Attempt(claim, claim.expires_monotonic, now, order=next(self.orders))
        held = self.by_id.pop(claim.id, None)
        if held is not None:  # a job's new attempt replaces one the master still had
            del self.by_state[held.state][claim.id]
        self.by_id[claim.id] = attempt
        self.by_state[State.CLAIMED][claim.id] = attempt
        if runs:
            self.move(attempt, State.RUNNING)
        else:
            attempt.start_recorded = False
        return attempt

    def start(self, attempt: Attempt, since: float) -> None:
        """The worker started this claimed attempt, at `since` (its fence slot says so)."""
        self.move(attempt, State.RUNNING)
        attempt.started = since

    def lose(self, attempt: Attempt) -> None:
        """A renewal round did not extend this claimed attempt: another may own its job."""
        self.move(attempt, State.LOST)

    def stop_alone(self, attempt: Attempt, reason: StopReason, kill_at: float) -> None:
        """Its worker was told to stop this attempt alone, and is killed at `kill_at` if it
        still runs then."""
        self.move(attempt, State.STOPPING)
        attempt.stop_reason, attempt.kill_at = reason, kill_at

    def stop_worker(self, attempt: Attempt) -> None:
        """Its whole worker is stopped for this attempt."""
        self.move(attempt, State.STOPPING)
        attempt.stops_worker = True

    def settle(self, attempt: Attempt, now: float, completed: bool, result: str | None) -> None:
        """Its code is done: `completed`, with this encoded result, or else its end only the
        worker can record."""
        if completed:
            self.move(attempt, State.COMPLETED)
            attempt.claim = attempt.claim.completed(result)
        else:
            self.move(attempt, State.UNRECORDED)
        attempt.ended = attempt.ended or now

    def doubt(self, attempt: Attempt) -> None:
        """Its worker died where the master cannot tell whether it ran: only maintenance,
        after its lease, can end it."""
        self.move(attempt, State.UNRECORDED)

    def end(self, attempt: Attempt) -> None:
        """The master no longer holds it: acknowledged, or given back."""
        self.move(attempt, State.ENDED)
        del self.by_id[attempt.claim.id]

    def move(self, attempt: Attempt, to: State) -> None:
        if to not in ALLOWED[attempt.state]:
            raise Refused(
                f"job {attempt.claim.id}'s attempt cannot go from {attempt.state} to {to}"
            )
        del self.by_state[attempt.state][attempt.claim.id]
        if to is not State.ENDED:
            self.by_state[to][attempt.claim.id] = attempt
        attempt.state = to
