"""The attempt's span as every runner enters it: around a plain call, around an awaited
coroutine (several at once in one event loop) and inside a thread; and nothing at all while
no tracer provider is set."""

from __future__ import annotations

import asyncio
import dataclasses
import threading

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jobq import tracing
from jobq.records import ClaimedJob
from tests.support.claims import claim
from tests.support.spans import finished, one, tracing_here

TRACER = "job's own code"


def test_without_a_tracer_provider_nothing_is_made() -> None:
    assert tracing.tracer() is None
    assert tracing.processing(claim(1), "w") is tracing.UNTRACED
    assert tracing.publishing([claim(1)]) is tracing.UNPUBLISHED


async def job(number: int, started: asyncio.Barrier) -> None:
    # Both attempts are inside their spans before either makes its own: a context that
    # leaked between tasks would give one the other's parent.
    await started.wait()
    with trace.get_tracer(TRACER).start_as_current_span(f"GET /{number}"):
        await asyncio.sleep(0)


async def attempt(number: int, started: asyncio.Barrier) -> None:
    with tracing.processing(claim(number), "w") as span:
        await job(number, started)
        span.ended(None)


async def two_attempts() -> None:
    started = asyncio.Barrier(2)
    await asyncio.gather(attempt(1, started), attempt(2, started))


def test_a_coroutine_jobs_spans_are_children_of_its_attempt() -> None:
    with tracing_here() as exporter:
        asyncio.run(two_attempts())
    spans = finished(exporter)
    for number in (1, 2):
        process = one(spans, name="t process", messaging__message__id=str(number))
        assert one(spans, name=f"GET /{number}")["parent"] == process["span"]
        assert process["parent"] is None  # the made-up claims carry no stored context


def test_a_thread_jobs_spans_are_children_of_its_attempt() -> None:
    def run() -> None:
        with (
            tracing.processing(claim(3), "w"),
            trace.get_tracer(TRACER).start_as_current_span("GET /3"),
        ):
            pass

    with tracing_here() as exporter:
        thread = threading.Thread(target=run)
        thread.start()
        thread.join(timeout=10)
    spans = finished(exporter)
    assert one(spans, name="GET /3")["parent"] == one(spans, name="t process")["span"]


def interrupted(stored: ClaimedJob, handled: bool) -> None:
    with tracing.processing(stored, "w") as span:
        if handled:
            span.failed(ValueError("handled"))
        raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("handled", "recorded"), [(True, "ValueError"), (False, "KeyboardInterrupt")]
)
def test_an_attempts_exception_is_recorded_once(handled: bool, recorded: str) -> None:
    context = f"00-{'ab' * 16}-{'cd' * 8}-01"
    stored = dataclasses.replace(claim(4), traceparent=context, tracestate="vendor=x")
    with tracing_here() as exporter, pytest.raises(KeyboardInterrupt):
        interrupted(stored, handled)
    (process,) = finished(exporter)
    assert process["exceptions"] == [recorded]
    assert process["status"] == "ERROR"
    assert process["trace"] == "ab" * 16
    assert process["parent"] == "cd" * 8
    assert process["links"] == ["cd" * 8]


def test_flush_exports_what_a_batch_processor_still_holds() -> None:
    # A forked worker leaves by os._exit, past the SDK's atexit flush: forking.py calls this.
    with tracing_here() as exporter:
        provider = trace.get_tracer_provider()
        assert isinstance(provider, TracerProvider)
        held = InMemorySpanExporter()
        provider.add_span_processor(BatchSpanProcessor(held, schedule_delay_millis=60_000))
        with trace.get_tracer(TRACER).start_as_current_span("last"):
            pass
        assert held.get_finished_spans() == ()
        tracing.flush()
        assert [span.name for span in held.get_finished_spans()] == ["last"]
        assert [span["name"] for span in finished(exporter)] == ["last"]
