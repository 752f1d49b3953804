"""Tracing across processes: a job enqueued in a traced request here runs in a supervised
worker whose application set a tracer provider in on_worker_start, and its attempt's span
joins the request's trace. The workers write their spans to a file each (tracing_app)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace

import jobq
from tests.support.apps import span_files
from tests.support.http import answering_http
from tests.support.spans import finished, one, tracing_here
from tests.support.supervising import FAST, supervisor
from tests.support.waiting import wait_for


class Traced(jobq.Job):
    """The producer's side of tracing_app.Traced (same job_name)."""

    job_name = "tracing_app.Traced"

    def __init__(self, fail: bool = False, spawn: bool = False, fetch: str = "") -> None:
        self.fail = fail
        self.spawn = spawn
        self.fetch = fetch


class TracedAsync(Traced):
    job_name = "tracing_app.TracedAsync"


pytestmark = pytest.mark.lease(6)
WANTED = {"plain", "failing", "spawning", "spawned", "tick"}


def processed(folder: Path, wanted: set[str] = WANTED) -> list[dict[str, Any]] | None:
    spans = span_files.read(folder)
    # The attempts' spans: a publish span names its job's type before that job has run.
    attempts = [span for span in spans if span["kind"] == "CONSUMER"]
    seen = {span["attributes"].get("messaging.destination.name") for span in attempts}
    return spans if seen >= wanted else None


@pytest.mark.databases("sqlite", "postgresql")
def test_a_job_enqueued_in_a_traced_request_runs_in_its_trace(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    with tracing_here() as exporter:
        with trace.get_tracer("test").start_as_current_span("request"):
            plain = queue.enqueue(Traced(), type="plain")
            failing = queue.enqueue(
                Traced(fail=True), type="failing", retry=jobq.RetryPolicy(max_attempts=1)
            )
            spawning = queue.enqueue(Traced(spawn=True), type="spawning")
        here = finished(exporter)
    folder = tmp_path / "spans"
    folder.mkdir()
    env = {"TRACING_SPANS": str(folder), "TRACING_DSN": dsn}
    args = ("--workers", "2", "--app", "tracing_app", *FAST)
    with supervisor(dsn, *args, env=env) as running:
        there = wait_for("the workers' spans of every job", lambda: processed(folder), 45)
        workers = {str(p.pid) for p in running.workers()}
        running.signal(signal.SIGTERM)
        assert running.wait() == 0
    assert {path.stem for path in folder.glob("*.jsonl")} <= workers
    request = one(here, name="request")

    # The attempt's span, in another process, is the child of the enqueue's.
    publish = one(here, name="plain publish")
    process = one(there, name="plain process")
    assert process["trace"] == request["trace"]
    assert process["parent"] == publish["span"]
    assert process["links"] == [publish["span"]]
    assert process["kind"] == "CONSUMER"
    attributes = process["attributes"]
    assert attributes["messaging.system"] == "jobq"
    assert attributes["messaging.message.id"] == str(plain)
    assert attributes["jobq.attempt.number"] == 1
    assert attributes["jobq.attempt.outcome"] == "completed"
    assert len(attributes["jobq.worker.id"]) == 16

    failed = one(there, name="failing process")
    assert failed["attributes"]["messaging.message.id"] == str(failing)
    assert failed["status"] == "ERROR"
    assert failed["exceptions"] == ["ValueError"]
    assert failed["attributes"]["jobq.attempt.outcome"] == "failed"

    # A job enqueued from a running job continues the trace, in the worker.
    spawner = one(there, name="spawning process")
    assert spawner["attributes"]["messaging.message.id"] == str(spawning)
    inner = one(there, name="spawned publish")
    assert inner["parent"] == spawner["span"]
    spawned = one(there, name="spawned process")
    assert spawned["parent"] == inner["span"]
    assert spawned["trace"] == request["trace"]

    # Each schedule slot's job starts a trace of its own, linked from nothing.
    ticks = [span for span in there if span["name"] == "tick process"]
    assert ticks
    assert all(tick["parent"] is None and tick["links"] == [] for tick in ticks)
    assert len({tick["trace"] for tick in ticks} | {request["trace"]}) == len(ticks) + 1


@pytest.mark.databases("postgresql")
def test_coroutine_and_thread_attempts_of_a_concurrent_worker_each_run_in_their_own_span(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    folder = tmp_path / "spans"
    folder.mkdir()
    env = {"TRACING_SPANS": str(folder), "TRACING_DSN": dsn}
    args = ("--workers", "1", "--concurrency", "4", "--app", "tracing_app", *FAST)
    wanted = {"threaded", "coroutine", "coroutine-failing", "spawned"}
    with answering_http() as url:
        with tracing_here() as exporter:
            with trace.get_tracer("test").start_as_current_span("request"):
                threaded = queue.enqueue(Traced(spawn=True), type="threaded")
                coroutine = queue.enqueue(TracedAsync(spawn=True, fetch=url), type="coroutine")
                once = jobq.RetryPolicy(max_attempts=1)
                failing = queue.enqueue(
                    TracedAsync(fail=True), type="coroutine-failing", retry=once
                )
            here = finished(exporter)
        with supervisor(dsn, *args, env=env) as running:
            there = wait_for("the spans of every job", lambda: processed(folder, wanted), 45)
            running.signal(signal.SIGTERM)
            assert running.wait() == 0
    request = one(here, name="request")
    for job_id, name in ((threaded, "threaded"), (coroutine, "coroutine")):
        process = one(there, name=f"{name} process")
        assert process["parent"] == one(here, name=f"{name} publish")["span"]
        assert process["trace"] == request["trace"]
        assert process["attributes"]["messaging.message.id"] == str(job_id)
        assert process["attributes"]["jobq.attempt.outcome"] == "completed"
    # Each job enqueued from a running job is the child of that job's own span: the span is
    # current in the coroutine's task and in the thread, not in its siblings.
    parents = {span["parent"] for span in there if span["name"] == "spawned publish"}
    assert parents == {
        one(there, name=f"{name} process")["span"] for name in ("threaded", "coroutine")
    }
    # The coroutine's HTTP call, made by an instrumented httpx client, is its span's child.
    assert one(there, name="GET")["parent"] == one(there, name="coroutine process")["span"]
    failed = one(there, name="coroutine-failing process")
    assert failed["attributes"]["messaging.message.id"] == str(failing)
    assert failed["status"] == "ERROR"
    assert failed["exceptions"] == ["ValueError"]
    assert failed["attributes"]["jobq.attempt.outcome"] == "failed"
