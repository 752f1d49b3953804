"""A claim's rows read as claims by a backend detached from any connection, as the async
driver holds one: each lease end in UTC and each retry policy its own row's, though equal
ones are converted once a claim."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from jobq.backends.postgresql import PostgresBackend
from jobq.backends.rows import Runner
from jobq.retry import RetryPolicy

PARIS = timezone(timedelta(hours=1))


def row(job_id: int, lease_until: datetime, max_attempts: int = 3) -> tuple[Any, ...]:
    """(token, CLAIM_COLUMNS..., status), as PostgreSQL's batched claim returns them."""
    return (
        f"token-{job_id}",
        job_id,
        "t",
        "C",
        "{}",
        1,
        lease_until,
        max_attempts,
        10.0,
        3600.0,
        True,
        None,
        None,
        None,
        None,
        "in_progress",
    )


def test_each_claim_of_a_batch_has_its_own_row_s_lease_end_in_utc_and_policy() -> None:
    end = datetime(2026, 1, 1, 13, tzinfo=PARIS)
    later = end + timedelta(seconds=5)
    rows = [row(1, end), row(2, end, max_attempts=7), row(3, later), row(4, later)]
    claims = dict(PostgresBackend.detached().claims_of(rows, 99.0))
    assert [claims[f"token-{n}"].lease_until for n in (1, 2, 3, 4)] == [
        datetime(2026, 1, 1, 12, tzinfo=UTC),
        datetime(2026, 1, 1, 12, tzinfo=UTC),
        datetime(2026, 1, 1, 12, 0, 5, tzinfo=UTC),
        datetime(2026, 1, 1, 12, 0, 5, tzinfo=UTC),
    ]
    assert all(claim.lease_until.tzinfo is UTC for claim in claims.values())
    assert [claims[f"token-{n}"].retry for n in (1, 2, 3)] == [
        RetryPolicy(),
        RetryPolicy(max_attempts=7),
        RetryPolicy(),
    ]
    assert claims["token-3"].lease_until is claims["token-4"].lease_until, "converted once"
    assert {claim.expires_monotonic for claim in claims.values()} == {99.0}


def test_a_runner_binds_every_field_of_its_own() -> None:
    runner = Runner("host-1", 42, "worker-1")
    assert runner.params() == runner._asdict()
