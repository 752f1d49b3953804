"""Bounded waits: poll a condition until it holds, or fail the test naming what it waited for."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import jobq

T = TypeVar("T")


def wait_for(what: str, condition: Callable[[], T | None], timeout: float = 15.0) -> T:
    """Poll `condition` until it returns something truthy, and return that; fail the test
    after `timeout`. A condition may answer None for "not yet", and the result is never None."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def wait_lease_ended(queue: jobq.Queue, job_id: int) -> None:
    """Wait until the database itself considers the job's lease over."""
    wait_for(
        f"the lease of job {job_id} to end",
        lambda: any(lease.id == job_id for lease in queue.backend.expired_leases(100)),
    )
