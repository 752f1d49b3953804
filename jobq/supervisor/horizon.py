"""The horizon watch: what holds back the database's cleanup of the rows jobs leave dead.

Every claim steps over the index entries of the jobs run since the oldest open snapshot (or
replication slot, or prepared transaction) began, until cleanup may remove them: an hour-long
report on a busy database leaves millions in front of each claim. The housekeeper reads the
oldest holder after each maintenance run (Queue.horizon); the master exports it and warns,
naming the holder, once it has held the horizon longer than --horizon-warning, again for
each new holder, and says when it is released.
"""

from __future__ import annotations

import logging
import math

from .. import protocol
from .metrics import Metrics

log = logging.getLogger("jobq")


class HorizonWatch:
    def __init__(self, metrics: Metrics, threshold: float) -> None:
        self.metrics = metrics
        self.threshold = threshold
        self.warned: str | None = None  # the holder last warned of, while it holds
        self.unreadable = False  # said once that the database will not tell

    def saw(self, read: protocol.HorizonRead) -> None:
        if read.error is not None:
            if not self.unreadable:
                self.unreadable = True
                log.warning(
                    "Cannot read what holds back the database's cleanup (%s): on MariaDB and "
                    "MySQL, grant PROCESS to jobq's user to watch it",
                    read.error,
                    extra={"event": "horizon_unreadable"},
                )
            return
        self.metrics.horizon_age.set(math.nan if read.age is None else read.age)
        self.metrics.horizon_backlog.set(math.nan if read.backlog is None else read.backlog)
        held_long = read.age is not None and read.age >= self.threshold
        if held_long and read.holder != self.warned:
            self.warned = read.holder
            log.warning(
                "%s has held back the database's cleanup of dead rows for %.0f s (%s behind): "
                "claims slow down until it ends",
                read.holder or "A session",
                read.age,
                read.backlog,
                extra={"event": "horizon_held"},
            )
        elif not held_long and self.warned is not None:
            log.info(
                "%s no longer holds back the database's cleanup",
                self.warned,
                extra={"event": "horizon_released"},
            )
            self.warned = None
