"""OpenTelemetry tracing: a PRODUCER span for each enqueue, a CONSUMER span for each attempt,
and the W3C trace context that the job's row carries from the one to the other.

jobq uses the OpenTelemetry API only (the `otel` extra) and never configures an SDK: the
application does, as OpenTelemetry intends. Tracing is off until the application sets a tracer
provider: without the API installed, or before a provider is set, each entry point here returns
at its first check, having made no span, read no context and changed no row.

An attempt's span is a CHILD of the context stored with its job, and also links to it. Child,
because one job is one message: the conventions allow the creation context as the parent when
a span processes a single message, and the point of tracing a queue is one trace from the
request that enqueued a job to the job's run (Celery's instrumentation does the same; River's
otelriver stores no context, and Oban's links by default, which leaves the run in a trace of
its own). The link is the one the conventions require, so that a tool which follows only links
still finds the producer. A job stored without a context (a schedule's slot, or enqueued while
tracing was off) starts a trace of its own, never one borrowed from the worker's surroundings.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from typing import Any, Protocol

from .outcomes import printable
from .records import ClaimedJob, Outcome

try:
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # the otel extra is absent: tracing stays off for the process's life
    trace = None  # type: ignore[assignment]

SYSTEM = "jobq"

# The row's columns are W3C's fields whatever propagator the application configured globally:
# what a job carries must not change meaning with another process's settings.
W3C = TraceContextTextMapPropagator() if trace is not None else None

# The last tracer provider seen, and jobq's tracer from it (None: it traces nothing). Setting
# the global provider is allowed once, so this is looked up again only when it changes.
_seen: tuple[object, trace.Tracer | None] = (None, None)


def tracer() -> trace.Tracer | None:
    """jobq's tracer, or None while tracing is off (no API, or no tracer provider set)."""
    global _seen
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if provider is not _seen[0]:
        off = isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
        _seen = (provider, None if off else provider.get_tracer("jobq", jobq_version()))
    return _seen[1]


def jobq_version() -> str:
    # Imported here: importlib.metadata (with zipfile and csv) is 0.4 MiB that a process on
    # MariaDB or SQLite would otherwise hold for nothing (psycopg_binary imports it anyway).
    from importlib.metadata import version

    return version("jobq")


def flush(timeout_millis: int = 2000) -> None:
    """Export what the application's tracer provider still holds (a BatchSpanProcessor's
    queue): a forked worker ends with os._exit, so the SDK's own atexit flush never runs.
    Never raises: it runs on the way out of a process that must exit."""
    if trace is None:
        return
    force = getattr(trace.get_tracer_provider(), "force_flush", None)
    if force is not None:
        with suppress(Exception):
            force(timeout_millis)


class Message(Protocol):
    @property
    def type(self) -> str: ...


class Publication(Protocol):
    """What the code storing one enqueue's rows learns from, and tells, its span."""

    @property
    def context(self) -> Mapping[str, str]:
        """The trace context each row must carry: `traceparent`, and `tracestate` if any
        (empty while tracing is off: the rows keep no context)."""

    def stored(self, ids: Sequence[int]) -> None:
        """The rows are stored, with these ids."""


class Unpublished:
    context: Mapping[str, str] = {}

    def stored(self, ids: Sequence[int]) -> None:
        pass


# Shared by every enqueue while tracing is off, as UNTRACED by every attempt.
UNPUBLISHED: AbstractContextManager[Publication] = nullcontext(Unpublished())


class Published:
    def __init__(self, span: trace.Span, context: Mapping[str, str]) -> None:
        self.span = span
        self.context = context

    def stored(self, ids: Sequence[int]) -> None:
        if len(ids) == 1:
            self.span.set_attribute("messaging.message.id", str(ids[0]))


def publishing(messages: Sequence[Message]) -> AbstractContextManager[Publication]:
    """The PRODUCER span `<type> publish` of one enqueue or enqueue_many, current for the code
    inside the `with`, which stores `messages` with its context. One entry point for Queue's
    blocking write and AsyncQueue's awaited one: the span lives in the caller's context, so
    an awaited write keeps it current in its own task until the rows are stored."""
    found = tracer()
    if found is None:
        return UNPUBLISHED
    return _publishing(found, messages)


@contextmanager
def _publishing(found: trace.Tracer, messages: Sequence[Message]) -> Iterator[Publication]:
    types = {message.type for message in messages}
    destination = types.pop() if len(types) == 1 else None
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "send",
        "messaging.operation.name": "publish",
    }
    if destination is not None:
        attributes["messaging.destination.name"] = destination
    if len(messages) > 1:
        attributes["messaging.batch.message_count"] = len(messages)
    name = "publish" if destination is None else f"{destination} publish"
    with found.start_as_current_span(
        name, kind=trace.SpanKind.PRODUCER, attributes=attributes
    ) as span:
        carrier: dict[str, str] = {}
        assert W3C is not None
        W3C.inject(carrier)
        yield Published(span, carrier)


class AttemptSpan(Protocol):
    """What the code running one attempt tells its span (nothing, when tracing is off)."""

    def failed(self, error: BaseException | str) -> None:
        """The attempt failed with this exception (recorded) or reason."""

    def ended(self, outcome: Outcome | None) -> None:
        """How the attempt ended: a failure's acknowledged outcome, or None once its code
        completed (its acknowledgement may come later, with others)."""


class Untraced:
    def failed(self, error: BaseException | str) -> None:
        pass

    def ended(self, outcome: Outcome | None) -> None:
        pass


# Shared by every attempt while tracing is off: nullcontext can be entered again and again,
# with `with` and with `async with`.
UNTRACED: AbstractContextManager[AttemptSpan] = nullcontext(Untraced())


class Traced:
    def __init__(self, span: trace.Span) -> None:
        self.span = span
        self.recorded = False

    def failed(self, error: BaseException | str) -> None:
        self.recorded = True
        if isinstance(error, BaseException):
            self.span.record_exception(error)
            error = printable(error)
        self.span.set_status(trace.StatusCode.ERROR, error)

    def ended(self, outcome: Outcome | None) -> None:
        self.span.set_attribute("jobq.attempt.outcome", str(outcome or Outcome.COMPLETED))


def processing(claim: ClaimedJob, worker: str) -> AbstractContextManager[AttemptSpan]:
    """The CONSUMER span `<type> process` of one attempt, current for the code inside the
    `with`: spans the job makes (an HTTP client's, a job it enqueues) are its children.

    The one entry point for every way an attempt runs. Enter it in the thread or task that
    runs the job's code (the span is current in that context only): around a plain call,
    around `await job_coroutine`, or inside the thread that runs the job. An exception that
    leaves the `with` is recorded; one the caller handles it reports with failed()."""
    found = tracer()
    if found is None:
        return UNTRACED
    return _processing(found, claim, worker)


@contextmanager
def _processing(found: trace.Tracer, claim: ClaimedJob, worker: str) -> Iterator[AttemptSpan]:
    assert W3C is not None
    stored = Context()
    links = []
    if claim.traceparent is not None:
        carrier = {"traceparent": claim.traceparent, "tracestate": claim.tracestate or ""}
        stored = W3C.extract(carrier)
        producer = trace.get_current_span(stored).get_span_context()
        if producer.is_valid:
            links.append(trace.Link(producer))
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": claim.type,
        "messaging.message.id": str(claim.id),
        "jobq.attempt.number": claim.attempt,
        "jobq.worker.id": worker,
    }
    with found.start_as_current_span(
        f"{claim.type} process",
        context=stored,
        kind=trace.SpanKind.CONSUMER,
        attributes=attributes,
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        attempt = Traced(span)
        try:
            yield attempt
        except BaseException as error:
            if not attempt.recorded:
                attempt.failed(error)
            raise
