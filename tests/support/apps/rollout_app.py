"""Jobs for the deployment tests: short and long attempts journaled with jobq's own
history journal, and one that leaves an orphan behind for PID 1 to reap.

Loaded by workers as `rollout_app` (the tests put this folder on PYTHONPATH)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import jobq
from jobq.testing.jobs import JournaledSleep


class Work(JournaledSleep):
    job_name = "Work"
    type = "work"


class Orphan(jobq.Job):
    """Forks a grandchild that outlives its parent: the orphan is reparented to PID 1, which
    must reap it when it exits, or it stays a zombie."""

    job_name = "Orphan"
    type = "orphan"

    def __init__(self, pid_file: str) -> None:
        self.pid_file = pid_file

    def handle(self) -> None:
        middle = os.fork()
        if middle == 0:
            orphan = os.fork()
            if orphan == 0:
                time.sleep(0.5)
                os._exit(0)
            Path(self.pid_file).write_text(str(orphan))
            os._exit(0)
        os.waitpid(middle, 0)
