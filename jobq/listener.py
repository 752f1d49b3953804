"""Hooks an application can implement to observe what a queue does with its jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .records import ClaimedJob, Outcome


class Listener:
    """Every method does nothing by default; override the ones you need.

    A listener runs in the worker, between database calls: keep it quick, since time spent
    in on_claimed comes out of the job's lease.
    """

    def on_claimed(self, claim: ClaimedJob) -> None:
        """The job was decoded and is about to run."""

    def on_settling(self, claim: ClaimedJob) -> None:
        """The attempt will run no more of the job's code; its outcome is about to be
        recorded (run() only)."""

    def on_settled(self, claim: ClaimedJob, outcome: Outcome) -> None:
        """run() recorded how the attempt ended; also just before it re-raises a
        BaseException from handle(), which leaves run() with no outcome to return."""

    def on_completed(self, claim: ClaimedJob) -> None:
        """The attempt was acknowledged as done; claim.result holds its result as stored
        (the codec's text, JSON by default; None when handle() returned None)."""

    def on_failed(self, claim: ClaimedJob, error: BaseException | str) -> None:
        """The attempt was recorded as failed; its retry policy decided what follows."""

    def on_ownership_lost(self, claim: ClaimedJob) -> None:
        """An acknowledgement was refused: maintenance had already recovered the job."""
