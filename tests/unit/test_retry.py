"""RetryPolicy: the backoff formula, its bounds, its validation, and what follows a failure."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobq import RetryPolicy, Status
from jobq.outcomes import next_step
from jobq.retry import MAX_DELAY

# No example database: the suite leaves no files behind in the checkout.
SETTINGS = settings(max_examples=200, deadline=None, database=None)

# The full range the policy accepts, tiny subnormal floats included, and attempt numbers far
# past the point where 2**(n-1) stops fitting in a float.
seconds = st.floats(min_value=0, max_value=MAX_DELAY, allow_nan=False)
attempts = st.integers(min_value=1, max_value=5000)


def policies(jitter: bool | None = None) -> st.SearchStrategy[RetryPolicy]:
    return st.builds(
        RetryPolicy,
        max_attempts=st.integers(min_value=1, max_value=50),
        backoff=seconds,
        max_backoff=seconds,
        jitter=st.booleans() if jitter is None else st.just(jitter),
    )


def exact_delay(policy: RetryPolicy, attempt: int) -> float:
    """min(max_backoff, backoff * 2**(attempt-1)) in exact arithmetic, then rounded once."""
    return float(min(Fraction(policy.max_backoff), Fraction(policy.backoff) * 2 ** (attempt - 1)))


@SETTINGS
@given(policy=policies(), attempt=attempts, seed=st.integers(0, 2**32))
def test_delay_is_never_negative_nor_above_max_backoff(
    policy: RetryPolicy, attempt: int, seed: int
) -> None:
    delay = policy.delay_after(attempt, random.Random(seed))
    assert 0 <= delay <= policy.max_backoff


@SETTINGS
@given(policy=policies(jitter=False), attempt=attempts)
def test_delay_without_jitter_is_exactly_the_formula(policy: RetryPolicy, attempt: int) -> None:
    assert policy.delay_after(attempt) == exact_delay(policy, attempt)


@SETTINGS
@given(policy=policies(jitter=True), attempt=attempts, seed=st.integers(0, 2**32))
def test_jitter_stays_in_the_upper_half(policy: RetryPolicy, attempt: int, seed: int) -> None:
    ceiling = exact_delay(policy, attempt)
    delay = policy.delay_after(attempt, random.Random(seed))
    assert ceiling / 2 <= delay <= ceiling


def test_jitter_actually_varies_the_delay() -> None:
    # The bounds test above would also pass for a policy that ignored jitter altogether.
    policy = RetryPolicy(backoff=10, jitter=True)
    rng = random.Random(1)
    delays = {policy.delay_after(3, rng) for _ in range(50)}
    assert len(delays) > 40
    assert min(delays) < 30 < max(delays) <= 40


@SETTINGS
@given(attempt=attempts, max_backoff=seconds, jitter=st.booleans())
def test_zero_backoff_retries_at_once(attempt: int, max_backoff: float, jitter: bool) -> None:
    policy = RetryPolicy(backoff=0, max_backoff=max_backoff, jitter=jitter)
    assert policy.delay_after(attempt) == 0


def test_known_delays() -> None:
    policy = RetryPolicy(backoff=10, max_backoff=3600, jitter=False)
    assert [policy.delay_after(n) for n in range(1, 11)] == [
        10,
        20,
        40,
        80,
        160,
        320,
        640,
        1280,
        2560,
        3600,
    ]
    assert policy.delay_after(10**9) == 3600


def test_attempt_numbers_start_at_one() -> None:
    with pytest.raises(ValueError, match="attempt"):
        RetryPolicy().delay_after(0)


@pytest.mark.parametrize(
    ("fields", "error", "field"),
    [
        ({"max_attempts": 0}, ValueError, "max_attempts"),
        ({"max_attempts": -3}, ValueError, "max_attempts"),
        # Attempt counters are 32-bit columns: a bigger limit would fail at insert instead.
        ({"max_attempts": 2**31}, ValueError, "max_attempts"),
        ({"max_attempts": 2.0}, TypeError, "max_attempts"),
        ({"max_attempts": "3"}, TypeError, "max_attempts"),
        ({"max_attempts": True}, TypeError, "max_attempts"),
        ({"backoff": -1}, ValueError, "backoff"),
        ({"backoff": math.nan}, ValueError, "backoff"),
        ({"backoff": math.inf}, ValueError, "backoff"),
        ({"backoff": MAX_DELAY * 2}, ValueError, "backoff"),
        ({"backoff": True}, ValueError, "backoff"),
        ({"backoff": "10"}, ValueError, "backoff"),
        ({"max_backoff": -0.5}, ValueError, "max_backoff"),
        ({"max_backoff": math.nan}, ValueError, "max_backoff"),
        ({"max_backoff": -math.inf}, ValueError, "max_backoff"),
        ({"max_backoff": False}, ValueError, "max_backoff"),
        # A truthy string would be stored as jitter on: the opposite of what "no" means.
        ({"jitter": "no"}, TypeError, "jitter"),
        ({"jitter": None}, TypeError, "jitter"),
    ],
)
def test_invalid_policies_name_the_field(
    fields: dict[str, Any], error: type[Exception], field: str
) -> None:
    with pytest.raises(error, match=rf"^{field} "):
        RetryPolicy(**fields)


@pytest.mark.parametrize(
    "fields",
    [
        {"max_attempts": 1},
        {"max_attempts": 2**31 - 1},
        {"backoff": 0, "max_backoff": 0},
        {"backoff": MAX_DELAY, "max_backoff": MAX_DELAY},
        {"backoff": 5, "max_backoff": 1},
        {"jitter": False},
    ],
)
def test_valid_edge_policies(fields: dict[str, Any]) -> None:
    policy = RetryPolicy(**fields)
    assert all(getattr(policy, name) == value for name, value in fields.items())


# -- what the queue does after a failed attempt -------------------------------------------


@SETTINGS
@given(policy=policies(jitter=False), made=st.integers(min_value=1, max_value=60))
def test_next_step_requeues_while_attempts_remain(policy: RetryPolicy, made: int) -> None:
    status, delay = next_step(policy, made)
    if made < policy.max_attempts:
        assert status is Status.PENDING
        assert delay == exact_delay(policy, made)
    else:
        assert (status, delay) == (Status.FAILED, 0.0)


def test_next_step_decisions() -> None:
    policy = RetryPolicy(max_attempts=3, backoff=30, jitter=False)
    assert next_step(policy, 1) == (Status.PENDING, 30)
    assert next_step(policy, 2) == (Status.PENDING, 60)
    assert next_step(policy, 3) == (Status.FAILED, 0)
    # Maintenance can count an attempt past the limit; it must not earn a retry.
    assert next_step(policy, 4) == (Status.FAILED, 0)
    assert next_step(RetryPolicy(max_attempts=1), 1) == (Status.FAILED, 0)
    assert next_step(RetryPolicy(backoff=0), 1) == (Status.PENDING, 0)


def test_next_step_jitters_the_requeue_delay() -> None:
    policy = RetryPolicy(max_attempts=5, backoff=8, jitter=True)
    delays = {next_step(policy, 2)[1] for _ in range(20)}
    assert all(8 <= delay <= 16 for delay in delays)
    assert len(delays) > 1
