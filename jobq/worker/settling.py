"""The moment an attempt's job code is done and its outcome not yet recorded: the worker shows
it to the master in the settling mark (see mark.py), and kills what the job left running, so
that a retry never overlaps with it."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from ..listener import Listener
from ..records import ClaimedJob, Outcome
from . import attempt
from .mark import SettlingMark

log = logging.getLogger("jobq")

# How long killing a job's leftover processes may take to be confirmed.
LEFTOVERS_CONFIRM = 2.0


class SettlingReporter(Listener):
    """Shows the master when an attempt's job code is done, before its outcome is recorded,
    and remembers the outcome for an attempt that ends by a BaseException."""

    def __init__(self, mark: SettlingMark) -> None:
        self.mark = mark
        self.leftovers = attempt.Leftovers(os.getppid())
        self.settled: tuple[ClaimedJob, Outcome] | None = None

    def on_claimed(self, claim: ClaimedJob) -> None:
        self.leftovers.starting()

    def on_settling(self, claim: ClaimedJob) -> None:
        self.mark.set(claim.id, claim.token)
        if self.leftovers.found():
            own = self.leftovers.own
            end_leftovers(
                claim, lambda: attempt.kill_and_confirm(os.getpid(), LEFTOVERS_CONFIRM, own)
            )

    def on_settled(self, claim: ClaimedJob, outcome: Outcome) -> None:
        self.settled = (claim, outcome)

    def outcome_of(self, claim: ClaimedJob) -> Outcome:
        if self.settled is not None and self.settled[0] is claim:
            return self.settled[1]
        return Outcome.FAILED


def end_leftovers(claim: ClaimedJob, kill: Callable[[], bool]) -> None:
    """Kill what the attempt's job started and left running, before its outcome is recorded:
    a failed attempt is retried, and its leftovers must not overlap with the retry. `kill`
    kills them and says whether they are confirmed gone: a process worker's kills all it
    started but its own processes, there before the attempt; a concurrent worker's, those
    traced to the attempt (concurrent/leftovers.py)."""
    log.warning(
        "Job %d left processes running: killing them", claim.id, extra={"event": "leftovers"}
    )
    if not kill():
        log.error(
            "Job %d's leftover processes still run after SIGKILL",
            claim.id,
            extra={"event": "kill_unconfirmed"},
        )
