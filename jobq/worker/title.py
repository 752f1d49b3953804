"""The worker's process title: what `ps` shows an operator. Never a DSN or a payload."""

from __future__ import annotations

import time

from setproctitle import setproctitle

from ..records import ClaimedJob

shown = ""
# "jobq-supervise: worker", and its pool's name when --pool made it.
who = "jobq-supervise: worker"


def show(text: str) -> None:
    global shown
    if text != shown:
        setproctitle(text)
        shown = text


def starting(pool: str | None) -> None:
    # Set first thing after the fork: until then the child shows its master's title.
    global who
    if pool is not None:
        who = f"jobq-supervise: worker [{pool}]"
    show(f"{who} starting")


def state(claim: ClaimedJob | None, started: float) -> None:
    """Idle, or the job being run and for how long."""
    if claim is None:
        show(f"{who} idle")
        return
    seconds = int(time.monotonic() - started)
    show(f"{who} job {claim.id} {claim.type} {claim.class_name} {seconds}s")
