"""A worker's session: its connection to the database, opened (and opened again after an
outage) together with the first claim it makes on it."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from .. import hooks
from ..queue import Queue, schema
from ..records import ClaimedJob
from .settings import WorkerSettings
from .settling import SettlingReporter

log = logging.getLogger("jobq")

# A worker that lost its database tries again after this, doubling up to the maximum.
FIRST_RECONNECT_WAIT = 0.5
MAX_RECONNECT_WAIT = 5.0


@dataclass
class Session:
    """A worker's connection, whether it can be woken by the database, and the claims it made
    on connecting, if any."""

    queue: Queue
    notifying: bool
    first: list[ClaimedJob]


def close_quietly(queue: Queue | None) -> None:
    if queue is not None:
        with contextlib.suppress(Exception):
            queue.close()


class DatabaseLost(Exception):
    """A database call failed in a way that leaves this worker without a usable connection."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def open_session(
    settings: WorkerSettings,
    reporter: SettlingReporter,
    stopping: threading.Event,
    claim: Callable[[Queue], list[ClaimedJob]],
    patient: bool,
) -> Session | None:
    """Connect and make a first claim; None if that cannot be done.

    The first claim comes before the worker says it is ready: a connection that works but
    cannot claim (no schema, no permission) is a worker that cannot start, which the master
    counts towards a crash loop. A patient worker (the database worked before: this is an
    outage, not a misconfiguration) keeps trying instead, until it is told to stop.
    """
    delay = FIRST_RECONNECT_WAIT
    while True:
        queue: Queue | None = None
        try:
            queue = Queue.connect(
                settings.dsn,
                lease_duration=settings.lease,
                listener=reporter,
                listen_dsn=settings.listen_dsn,
            )
            queue.hooks = hooks.for_jobs()
            notifying = queue._listen()
            return Session(queue, notifying, claim(queue))
        except Exception as error:
            close_quietly(queue)
            # A schema dropped (or never created) names its fix.
            advice = schema.hint(settings.dsn, error)
            if not patient:
                log.error(
                    "Worker cannot start: %s%s", error, advice, extra={"event": "worker_failed"}
                )
                return None
            log.warning(
                "Database out of reach, trying again in %.1f s: %s%s",
                delay,
                error,
                advice,
                extra={"event": "db_wait"},
            )
        if stopping.wait(delay):
            return None
        delay = min(delay * 2, MAX_RECONNECT_WAIT)
