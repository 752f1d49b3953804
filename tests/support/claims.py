"""Claims made up for the master's and the worker's bookkeeping, in tests that need no
database: each job id gets its own token and lease end."""

from __future__ import annotations

from datetime import UTC, datetime

from jobq.records import ClaimedJob
from jobq.retry import RetryPolicy


def claim(job_id: int) -> ClaimedJob:
    return ClaimedJob(
        id=job_id,
        type="t",
        class_name="C",
        payload="",
        attempt=1,
        token=f"token-{job_id}",
        lease_until=datetime(2026, 1, 1, tzinfo=UTC),
        retry=RetryPolicy(),
        deadline=None,
        expires_monotonic=100.0 + job_id,
    )
