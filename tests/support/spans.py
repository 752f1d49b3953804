"""Tracing switched on in the test process, as an application switches it on: an SDK tracer
provider set globally, with OpenTelemetry's in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from tests.support.apps.span_files import summary


def unset_provider() -> None:
    """Forget the global tracer provider. OpenTelemetry lets a process set it once (its own
    test utilities reset it this way): without this, tracing would stay on for every later
    test that this pytest process runs."""
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


@contextmanager
def tracing_here() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    unset_provider()
    trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        unset_provider()
        provider.shutdown()


def finished(exporter: InMemorySpanExporter) -> list[dict[str, Any]]:
    return [summary(span) for span in exporter.get_finished_spans()]


def one(spans: list[dict[str, Any]], **wanted: Any) -> dict[str, Any]:
    """The one span with these fields (`name`, `parent`...) or attributes (by their names,
    dots as double underscores)."""

    def fits(span: dict[str, Any]) -> bool:
        for key, value in wanted.items():
            name = key.replace("__", ".")
            found = span[key] if key in span else span["attributes"].get(name)
            if found != value:
                return False
        return True

    matches = [span for span in spans if fits(span)]
    assert len(matches) == 1, (wanted, spans)
    return matches[0]


def parent_of(traceparent: str | None) -> tuple[str, str] | None:
    """The (trace, span) ids a stored W3C traceparent names: the span that enqueued the row."""
    if traceparent is None:
        return None
    _, trace_id, span_id, _ = traceparent.split("-")
    return trace_id, span_id


def ids(span: dict[str, Any]) -> tuple[str, str]:
    return span["trace"], span["span"]
