"""The worker's process title: what `ps` shows an operator. Never a DSN or a payload."""

from __future__ import annotations

import time

from setproctitle import setproctitle

from ..records import ClaimedJob

shown = ""


def show(text: str) -> None:
    global shown
    if text != shown:
        setproctitle(text)
        shown = text


def starting() -> None:
    # Set first thing after the fork: until then the child shows its master's title.
    show("jobq-supervise: worker starting")


def state(claim: ClaimedJob | None, started: float) -> None:
    """Idle, or the job being run and for how long."""
    if claim is None:
        show("jobq-supervise: worker idle")
        return
    seconds = int(time.monotonic() - started)
    show(f"jobq-supervise: worker job {claim.id} {claim.type} {claim.class_name} {seconds}s")
