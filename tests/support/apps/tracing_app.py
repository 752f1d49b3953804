"""An application that traces its workers as an application would: an SDK tracer provider
set in on_worker_start, with OpenTelemetry's in-memory exporter, whose spans an after_job
hook writes to TRACING_SPANS (a folder: a file per worker). Its jobs fail or enqueue another
job on request, and a coroutine job calls a URL with httpx on request (instrumented, as an
application would); a schedule gives a job every second.

Loaded by workers as `--app tracing_app` (the tests put this folder on PYTHONPATH); jobs
enqueued from a job go to TRACING_DSN."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import span_files  # type: ignore[import-not-found]
from opentelemetry import trace
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import jobq

exporter = InMemorySpanExporter()


@jobq.on_worker_start
def trace_this_worker() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    HTTPXClientInstrumentor().instrument()


@jobq.after_job
def write_spans(claim: jobq.ClaimedJob, outcome: jobq.Outcome) -> None:
    span_files.append(Path(os.environ["TRACING_SPANS"]), exporter.get_finished_spans())
    exporter.clear()


class Traced(jobq.Job):
    job_name = "tracing_app.Traced"

    def __init__(self, fail: bool = False, spawn: bool = False, fetch: str = "") -> None:
        self.fail = fail
        self.spawn = spawn
        self.fetch = fetch

    def handle(self) -> None:
        if self.fail:
            raise ValueError("failed on purpose")
        if self.spawn:
            with jobq.Queue.connect(os.environ["TRACING_DSN"]) as queue:
                queue.enqueue(Traced(), type="spawned")


class TracedAsync(Traced):
    """Traced as a coroutine, for a worker with --concurrency: it awaits before it works, so
    its span must stay current in its own task across the loop's other attempts."""

    job_name = "tracing_app.TracedAsync"

    async def handle(self) -> None:  # type: ignore[override]
        await asyncio.sleep(0.2)
        if self.fetch:
            async with httpx.AsyncClient() as client:
                (await client.get(self.fetch)).raise_for_status()
        Traced.handle(self)


jobq.schedule("tracing-tick", Traced(), every=1, type="tick")
