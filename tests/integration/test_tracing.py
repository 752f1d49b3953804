"""Tracing on each database: an enqueue's PRODUCER span, the trace context its rows carry
through every insert and claim statement, and each attempt's CONSUMER span, its child."""

from __future__ import annotations

import asyncio
from typing import ClassVar

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import (
    TraceContextTextMapPropagator,
)

import jobq
from tests.integration.test_async_queue import run
from tests.integration.test_schedules import at, every
from tests.support.jobs import Boom, Noop
from tests.support.spans import finished, ids, one, parent_of, tracing_here

pytestmark = pytest.mark.lease(60)
ONCE = jobq.RetryPolicy(max_attempts=1)
STATE = "vendor=opaque-value,other=1"


class Spawner(jobq.Job):
    """Enqueues a Noop on `into` as it runs."""

    type = "spawner"
    into: ClassVar[jobq.Queue | None] = None

    def handle(self) -> None:
        assert Spawner.into is not None
        Spawner.into.enqueue(Noop())


def test_each_attempt_is_a_child_of_the_enqueue_that_stored_its_job(queue: jobq.Queue) -> None:
    Spawner.into = queue
    with tracing_here() as exporter:
        with trace.get_tracer("test").start_as_current_span("request"):
            single = queue.enqueue(Noop())
            batch = queue.enqueue_many([Noop(), Boom()], retry=ONCE)
            spawner = queue.enqueue(Spawner())
        assert queue.process_jobs(10) == 5
    spans = finished(exporter)
    request = one(spans, name="request")
    # Every span but the request's is in its trace, the spawned job's too.
    assert {span["trace"] for span in spans} == {request["trace"]}

    publish = one(spans, name="noop publish", parent=request["span"])
    assert publish["kind"] == "PRODUCER"
    assert publish["attributes"] == {
        "messaging.system": "jobq",
        "messaging.destination.name": "noop",
        "messaging.message.id": str(single),
        "messaging.operation.type": "send",
        "messaging.operation.name": "publish",
    }
    process = one(spans, name="noop process", messaging__message__id=str(single))
    assert process["kind"] == "CONSUMER"
    assert process["parent"] == publish["span"]
    assert process["links"] == [publish["span"]]
    assert process["status"] == "UNSET"
    worker = process["attributes"].pop("jobq.worker.id")
    assert len(worker) == 16
    assert process["attributes"] == {
        "messaging.system": "jobq",
        "messaging.destination.name": "noop",
        "messaging.message.id": str(single),
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "jobq.attempt.number": 1,
        "jobq.attempt.outcome": "completed",
    }

    # One span for enqueue_many's rows: of two types, so named for the operation alone.
    many = one(spans, name="publish")
    assert many["attributes"]["messaging.batch.message_count"] == 2
    assert "messaging.destination.name" not in many["attributes"]
    for job_id in batch:
        assert one(spans, messaging__message__id=str(job_id))["parent"] == many["span"]
    failed = one(spans, name="boom process")
    assert failed["status"] == "ERROR"
    assert failed["exceptions"] == ["RuntimeError"]
    assert failed["attributes"]["jobq.attempt.outcome"] == "failed"

    # A job enqueued by a running job continues the trace, under the attempt's span.
    running = one(spans, name="spawner process", messaging__message__id=str(spawner))
    inner = one(spans, name="noop publish", parent=running["span"])
    spawned = one(spans, name="noop process", parent=inner["span"])
    assert (
        spawned["attributes"]["messaging.message.id"]
        == (inner["attributes"]["messaging.message.id"])
    )


def test_claims_of_every_kind_return_the_stored_context(queue: jobq.Queue) -> None:
    # The request continues a caller's trace that carries vendor state.
    caller = TraceContextTextMapPropagator().extract(
        {"traceparent": f"00-{'ab' * 16}-{'cd' * 8}-01", "tracestate": STATE}
    )
    with tracing_here() as exporter:
        with trace.get_tracer("test").start_as_current_span("request", context=caller):
            queue.enqueue(Noop(), priority=2)
            queue.enqueue_many([Noop(), Noop()], priority=1)
        spans = finished(exporter)
        single = ids(one(spans, name="noop publish", messaging__batch__message_count=None))
        many = ids(one(spans, name="noop publish", messaging__batch__message_count=2))
        first = queue.claim()
        assert first is not None
        assert parent_of(first.traceparent) == single
        assert first.tracestate == STATE
        # The acknowledgement that claims the next job in the same statement, then a batch.
        done, second = queue.complete_and_claim(first)
        assert done
        assert second is not None
        assert parent_of(second.traceparent) == many
        assert [parent_of(claim.traceparent) for claim in queue.claim_many(5)] == [many]


def test_a_schedule_slot_starts_a_trace_of_its_own(queue: jobq.Queue) -> None:
    schedule = [every(1)]
    with tracing_here() as exporter, trace.get_tracer("test").start_as_current_span("request"):
        queue.run_schedules(schedule, now=at(0))
        (taken,) = queue.run_schedules(schedule, now=at(1.2)).taken
        # Run inside a span too: the attempt borrows nothing from the worker's context.
        assert queue.process_jobs(1) == 1
    spans = finished(exporter)
    request = one(spans, name="request")
    process = one(spans, name="noop process", messaging__message__id=str(taken[2]))
    assert process["parent"] is None
    assert process["links"] == []
    assert process["trace"] != request["trace"]
    assert [span["name"] for span in spans] == ["noop process", "request"]


def test_async_enqueues_are_traced_as_sync_ones_in_the_task_that_awaits_them(
    queue: jobq.Queue, dsn: str
) -> None:
    async def request(aqueue: jobq.AsyncQueue, name: str, both_open: asyncio.Barrier) -> None:
        with trace.get_tracer("test").start_as_current_span(name):
            # Both requests' spans are open before either enqueues, and the two tasks share
            # one connection: a span that leaked between tasks would give the wrong parent.
            await both_open.wait()
            await aqueue.enqueue(Noop(), type=name)
            await aqueue.enqueue_many([Noop(), Noop()], type=name)

    async def scenario(aqueue: jobq.AsyncQueue) -> None:
        both_open = asyncio.Barrier(2)
        await asyncio.gather(request(aqueue, "a", both_open), request(aqueue, "b", both_open))

    with tracing_here() as exporter:
        run(dsn, scenario)
    spans = finished(exporter)
    by_ids = {ids(span): span for span in spans}
    claims = queue.claim_many(10)
    assert sorted(claim.type for claim in claims) == ["a", "a", "a", "b", "b", "b"]
    for claim in claims:
        parent = parent_of(claim.traceparent)
        assert parent is not None, f"job {claim.id} carries no trace context"
        publish = by_ids[parent]
        assert publish["name"] == f"{claim.type} publish"
        assert publish["kind"] == "PRODUCER"
        assert publish["parent"] == one(spans, name=claim.type)["span"]
        if "messaging.batch.message_count" not in publish["attributes"]:
            assert publish["attributes"]["messaging.message.id"] == str(claim.id)
    assert len(spans) == 6
