"""The fault suite's jobs (chaos_app), and a way to SIGKILL a worker between a claim's commit
and its report: the one window an outside kill can hardly hit on purpose.

An after_job hook runs once the attempt's acknowledgement committed, and with it the claim of
the worker's next jobs (complete_many_and_claim, or run_and_claim), before the worker tells
its master of them. While the file KILL_AFTER_COMMIT names exists, the first worker to remove
it there SIGKILLs itself. Loaded by workers as `claim_kill_app` (the tests put this folder on
PYTHONPATH).
"""

from __future__ import annotations

import os
import signal
from importlib import import_module

import jobq

# The fault suite's jobs, by the name workers import them under (this folder is on their path).
import_module("chaos_app")


@jobq.after_job
def kill_after_commit(claim: jobq.ClaimedJob, outcome: jobq.Outcome) -> None:
    flag = os.environ.get("KILL_AFTER_COMMIT")
    if flag is None:
        return
    try:
        os.unlink(flag)  # one worker wins it
    except FileNotFoundError:
        return
    os.kill(os.getpid(), signal.SIGKILL)
