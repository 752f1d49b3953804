"""Hypothesis strategies shared by the property tests."""

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

import jobq
from jobq.retry import MAX_DELAY

# Any JSON value Python's json module can write: what a job's state may hold.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    # Lone surrogates included: they are valid in Python strings and JSON, but not in UTF-8.
    | st.text(st.characters(codec=None)),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)

# Retry policies anywhere in their valid range.
policies = st.builds(
    jobq.RetryPolicy,
    max_attempts=st.integers(min_value=1, max_value=2**31 - 1),
    backoff=st.floats(min_value=0, max_value=MAX_DELAY),
    max_backoff=st.floats(min_value=0, max_value=MAX_DELAY),
    jitter=st.booleans(),
)
# Deadlines and schedules in a few time zones, far from the epoch both ways.
aware_times = st.datetimes(
    min_value=datetime(1971, 1, 1),
    max_value=datetime(2200, 1, 1),
    timezones=st.sampled_from(
        [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=11))]
    ),
)


# Names a Python attribute may have.
attribute_names = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True)
# The state of a job: attribute names to any JSON value.
states = st.dictionaries(attribute_names, json_values, max_size=6)


def chaos_state(state: dict[str, Any]) -> dict[str, Any]:
    """`state` with the fields a chaos_app.Chaos job needs."""
    return {"seconds": 0, "journal": "/dev/null", **state}
