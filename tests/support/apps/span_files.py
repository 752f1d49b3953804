"""Spans as the tracing tests compare them: one JSON line each, in a file per process, so
that a test can read what its workers' in-memory exporters held.

Imported by workers as `span_files` and by the tests as `tests.support.apps.span_files`; it
registers nothing, so importing it in a test process changes no job or schedule."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan


def summary(span: ReadableSpan) -> dict[str, Any]:
    """What the tests check of a span; ids as hex, as a tracing tool shows them."""
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace": f"{context.trace_id:032x}",
        "span": f"{context.span_id:016x}",
        "parent": None if span.parent is None else f"{span.parent.span_id:016x}",
        "links": [f"{link.context.span_id:016x}" for link in span.links],
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name,
        "exceptions": [
            (event.attributes or {}).get("exception.type")
            for event in span.events
            if event.name == "exception"
        ],
    }


def append(directory: Path, spans: Iterable[ReadableSpan]) -> None:
    lines = "".join(json.dumps(summary(span)) + "\n" for span in spans)
    with open(directory / f"{os.getpid()}.jsonl", "a") as out:
        out.write(lines)


def read(directory: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(directory.glob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
