"""The worker's process title: what `ps` shows an operator. Never a DSN or a payload."""

from __future__ import annotations

import time

from setproctitle import setproctitle

from ..records import ClaimedJob


def starting() -> None:
    # Set first thing after the fork: until then the child shows its master's title.
    setproctitle("jobq-supervise: worker starting")


def idle() -> None:
    setproctitle("jobq-supervise: worker idle")


def busy(claim: ClaimedJob, started: float) -> None:
    seconds = int(time.monotonic() - started)
    setproctitle(
        f"jobq-supervise: worker job {claim.id} {claim.type} {claim.class_name} {seconds}s"
    )
