"""Property-based tests (hypothesis) of what test_retry.py and test_codec.py do not already
cover, without a database: the supervisor's timing rule, the supervisor's own messages, and the
codec against any stored text (tests/integration/test_properties.py takes both through each
database).
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

import jobq
import tests.support.apps.chaos_app  # noqa: F401 - registers Chaos, Raise and Padded, decoded by name
from jobq import protocol, wire
from jobq.lease_clock import FENCE_LEAD, RENEW_RETRY_PAUSE
from jobq.outcomes import next_step
from jobq.records import ClaimedJob
from jobq.retry import MAX_DELAY
from jobq.supervisor.config import MINIMUMS, SupervisorConfig, fitted_timing
from tests.support.strategies import aware_times, chaos_state, json_values, policies, states

# No example database: the suite leaves no files behind in the checkout.
SETTINGS = settings(max_examples=300, deadline=None, database=None)

TERMS = ("renew_interval", "renew_timeout", "kill_grace", "safety_margin")
FORMULA = "renew_interval + 2 x renew_timeout + 1 s + kill_grace + 0.1 s + safety_margin < lease"

# -- the timing rule ---------------------------------------------------------------------------

# Quarter seconds: sums of these are exact in binary floating point, so the float arithmetic
# of the rule can be held to the exact inequality. Below the minimums, too.
quarters = st.integers(min_value=-8, max_value=240).map(lambda n: n / 4)


def config(lease: float, values: dict[str, float]) -> SupervisorConfig:
    return SupervisorConfig(
        dsn="sqlite:///unused.sqlite3",
        lease=lease,
        renew_interval=values["renew_interval"],
        renew_timeout=values["renew_timeout"],
        kill_grace=values["kill_grace"],
        safety_margin=values["safety_margin"],
    )


def exact_budget(values: dict[str, Decimal]) -> Decimal:
    return (
        values["renew_interval"]
        + 2 * values["renew_timeout"]
        + Decimal(repr(RENEW_RETRY_PAUSE))
        + values["kill_grace"]
        + Decimal(repr(FENCE_LEAD))
        + values["safety_margin"]
    )


@SETTINGS
@given(lease=st.floats(min_value=5.6, max_value=MAX_DELAY))
@example(lease=6.0)
@example(lease=31.0)
def test_a_lease_alone_gets_timing_options_that_pass_the_rule(lease: float) -> None:
    fitted = fitted_timing(lease)
    assert config(lease, fitted).problems() == []
    defaults = {name: getattr(SupervisorConfig(dsn="x"), name) for name in fitted}
    for name, value in fitted.items():
        assert MINIMUMS[name] <= value <= defaults[name]
    if lease >= 35:
        assert fitted == defaults


@SETTINGS
@given(
    values=st.fixed_dictionaries({term: quarters for term in TERMS}),
    lease=quarters.filter(lambda v: v > 0),
)
@example(
    values={"renew_interval": 1, "renew_timeout": 1, "kill_grace": 0, "safety_margin": 1}, lease=6
)
@example(
    values={"renew_interval": 1, "renew_timeout": 1, "kill_grace": 0, "safety_margin": 1}, lease=5
)
def test_the_timing_rule_accepts_exactly_what_the_inequality_allows(
    values: dict[str, float], lease: float
) -> None:
    problems = config(lease, values).problems()
    minimums_met = all(values[name] >= minimum for name, minimum in MINIMUMS.items())
    budget = exact_budget({name: Decimal(repr(value)) for name, value in values.items()})
    holds = budget < Decimal(repr(lease))
    assert (problems == []) == (minimums_met and holds), problems

    # Each refusal says which rule and names every term with the value it was given.
    for name, minimum in MINIMUMS.items():
        below = [p for p in problems if p.startswith(f"--{name.replace('_', '-')} must")]
        if values[name] < minimum:
            assert below == [
                f"--{name.replace('_', '-')} must be at least {minimum:g} s, got {values[name]:g}"
            ]
        else:
            assert below == []
    rule = [p for p in problems if FORMULA in p]
    assert len(rule) == (0 if holds else 1), problems
    for message in rule:
        terms = [values["renew_interval"], values["renew_timeout"], RENEW_RETRY_PAUSE]
        terms += [values["kill_grace"], FENCE_LEAD, values["safety_margin"]]
        named = "{:g} + 2 x {:g} + {:g} + {:g} + {:g} + {:g}".format(*terms)
        assert f"{named} = {float(budget):g} s, not below the {lease:g} s lease" in message


# Values as an operator types them (a tenth of a second), and a lease on the boundary or a
# hundredth of a second either side of it.
tenths = st.integers(min_value=10, max_value=300).map(lambda n: Decimal(n) / 10)


@settings(SETTINGS, derandomize=True)
@given(
    values=st.fixed_dictionaries({term: tenths for term in TERMS}),
    offset=st.sampled_from([Decimal("-0.01"), Decimal(0), Decimal("0.01")]),
)
@example(
    values={
        "renew_interval": Decimal(1),
        "renew_timeout": Decimal(1),
        "kill_grace": Decimal("0.1"),
        "safety_margin": Decimal("1.1"),
    },
    offset=Decimal(0),
)
def test_the_timing_rule_holds_for_decimal_options_on_the_boundary(
    values: dict[str, Decimal], offset: Decimal
) -> None:
    lease = exact_budget(values) + offset
    floats = {name: float(value) for name, value in values.items()}
    accepted = config(float(lease), floats).problems() == []
    assert accepted == (exact_budget(values) < lease), (values, lease)


# -- the retry policy outside the process that made it -----------------------------------------


@SETTINGS
@given(
    policy=policies,
    attempt=st.integers(min_value=1, max_value=2**31 - 1),
    lease_until=aware_times,
    deadline=st.none() | aware_times,
    expires=st.floats(allow_nan=False, allow_infinity=False),
)
def test_a_claim_survives_the_supervisor_s_messages(
    policy: jobq.RetryPolicy,
    attempt: int,
    lease_until: datetime,
    deadline: datetime | None,
    expires: float,
) -> None:
    """A dead worker's attempt is failed by the housekeeper from what the master was told,
    by datagram: the policy, times and attempt must arrive as they were."""
    claim = ClaimedJob(
        id=1,
        type="t",
        class_name="C",
        payload="{}",
        attempt=attempt,
        token="0" * 32,
        lease_until=lease_until,
        retry=policy,
        deadline=deadline,
        expires_monotonic=expires,
    )
    (row,) = protocol.attempts([claim])
    sent = protocol.FailAttempt(row, "The worker died")
    master, housekeeper = wire.pair()
    with master, housekeeper:
        wire.send(master, sent)
        received = wire.receive(housekeeper)
    assert isinstance(received, protocol.FailAttempt)
    (arrived,) = protocol.claims([received.claim])
    assert arrived == replace(claim, payload="")
    if not policy.jitter:
        assert next_step(arrived.retry, attempt) == next_step(policy, attempt)


# -- the codec against any stored text ---------------------------------------------------------


@SETTINGS
@given(
    class_name=st.sampled_from(["Chaos", "Raise", "Padded"]) | st.text(max_size=40),
    payload=(
        st.text(st.characters(codec=None))
        | json_values.map(json.dumps)
        | states.map(lambda s: json.dumps(chaos_state(s)))
        | st.integers(1, 5000).map(lambda n: "[" * n)
        | st.integers(4000, 5000).map(lambda n: "1" * n)  # past int()'s digit limit
    ),
)
def test_decoding_any_stored_text_gives_the_job_or_a_decode_error(
    class_name: str, payload: str
) -> None:
    """Whatever a row holds, a worker gets a job of the class it names or a DecodeError
    (which fails the attempt): never another exception, which would be the worker's."""
    codec = jobq.JsonCodec()
    try:
        job = codec.decode(class_name, payload)
    except jobq.DecodeError as error:
        message = str(error)
    else:
        assert type(job).job_name == class_name
        return
    assert message, "a DecodeError says what was wrong"


@SETTINGS
@given(state=states)
def test_the_stored_payload_is_a_fixed_point(state: dict[str, Any]) -> None:
    """A job decoded from a row and enqueued again stores exactly the same text."""
    codec = jobq.JsonCodec()
    job = codec.decode("Chaos", json.dumps(chaos_state(state)))
    first = codec.encode(job)
    assert codec.encode(codec.decode(*first)) == first
