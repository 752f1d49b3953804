"""A job whose attempts leave evidence for the history checker: it sleeps between a journaled
start and end."""

from __future__ import annotations

import time
from typing import Any

from ..job import Job
from .history import journal_attempt


class JournaledSleep(Job):
    """Sleeps `seconds` between its journaled start and end (see journal_attempt), so that
    check_history can tell whether two attempts of one job ran at the same time.

    Subclass it under your application's own job_name, type and retry policy; override
    journal_fields to add fields to both lines. The start line carries `seconds`, so that a
    fault injector can pick a worker that is sure to be inside handle() for a while yet.
    """

    job_name = "jobq.testing.JournaledSleep"
    type = "journaled-sleep"

    def __init__(self, seconds: float, journal: str) -> None:
        self.seconds = seconds
        self.journal = journal

    def journal_fields(self) -> dict[str, Any]:
        """Fields added to both of the attempt's lines."""
        return {}

    def handle(self) -> None:
        journal_attempt(self.journal, "start", seconds=self.seconds, **self.journal_fields())
        time.sleep(self.seconds)
        journal_attempt(self.journal, "end", **self.journal_fields())
