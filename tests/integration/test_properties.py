"""Property-based tests (hypothesis) through each database: a retry policy and any job state
come back from it as they were stored."""

from __future__ import annotations

import json
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings

import jobq
from tests.support.apps.chaos_app import Chaos
from tests.support.strategies import chaos_state, policies, states

# Examples that each go through a database: fewer, and on the one fresh database of the
# test (hypothesis would rather each example had its own, which no property here needs).
DB_SETTINGS = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@DB_SETTINGS
@given(policy=policies)
def test_a_policy_comes_back_from_the_database_as_it_was_stored(
    queue: jobq.Queue, policy: jobq.RetryPolicy
) -> None:
    job_type = uuid.uuid4().hex  # this example's own: nothing an earlier one left is claimed
    job_id = queue.enqueue(Chaos(0, "/dev/null"), type=job_type, retry=policy)
    record = queue.get(job_id)
    claim = queue.claim(job_type)
    assert record is not None
    assert claim is not None
    assert claim.id == job_id
    assert record.retry == claim.retry == policy
    queue.complete(claim)


@DB_SETTINGS
@given(state=states)
def test_any_payload_comes_back_from_the_database_byte_for_byte(
    queue: jobq.Queue, state: dict[str, Any]
) -> None:
    job = jobq.JsonCodec().decode("Chaos", json.dumps(chaos_state(state)))
    class_name, payload = jobq.JsonCodec().encode(job)
    job_type = uuid.uuid4().hex
    job_id = queue.enqueue(job, type=job_type)
    claim = queue.claim(job_type)
    assert claim is not None
    assert claim.id == job_id
    assert (claim.class_name, claim.payload) == (class_name, payload)
    assert vars(jobq.JsonCodec().decode(claim.class_name, claim.payload)) == vars(job)
    queue.complete(claim)
