"""Nothing breaks without the `otel` extra: in a process where OpenTelemetry cannot be
imported, jobs are enqueued, claimed and run on SQLite as ever, and carry no trace context."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# Run with every OpenTelemetry module refused (None in sys.modules makes its import raise
# ImportError, as a missing package does), whether or not the test's environment has it.
PROGRAM = """
import sys
sys.modules.update(dict.fromkeys(["opentelemetry", "opentelemetry.trace"], None))

import jobq
from jobq import tracing
from tests.support.jobs import Boom, Noop

assert tracing.trace is None and tracing.tracer() is None
with jobq.Queue.connect(sys.argv[1]) as queue:
    queue.install()
    queue.enqueue(Noop())
    queue.enqueue_many([Noop(), Boom()], retry=jobq.RetryPolicy(max_attempts=1))
    claim = queue.claim()
    assert claim is not None and (claim.traceparent, claim.tracestate) == (None, None)
    assert queue.run(claim) is jobq.Outcome.COMPLETED
    ran = queue.process_jobs(5)
    assert ran == 2, ran
    assert queue.counts() == {"completed": 2, "failed": 1}, queue.counts()
assert not [name for name, module in sys.modules.items() if "opentelemetry" in name and module]
print("ran without OpenTelemetry")
"""


def test_jobs_run_where_opentelemetry_cannot_be_imported(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, f"sqlite:///{tmp_path}/jobq.sqlite3"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ran without OpenTelemetry"
