"""Bad input under a running supervisor: rows no codec wrote, unknown classes, payloads that
do not fit their class, huge payloads, and handlers that raise every kind of exception. Each
bad job gets one failed attempt with a clear last_error; the supervisor keeps running, and
the jobs after them complete.

Also the command-line values of jobq-supervise not already refused in test_cli.py and
test_supervisor_pool.py (bad DSNs, the timing rule, grace periods are covered there).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import jobq
from jobq.queue.new_jobs import MAX_PAYLOAD_BYTES
from jobq.testing.history import read_journal
from tests.support.apps import APPS
from tests.support.apps.chaos_app import Chaos, Padded, Raise
from tests.support.supervising import FAST, metrics_port, scrape, supervisor
from tests.support.waiting import wait_for

ONCE = jobq.RetryPolicy(max_attempts=1)

# Rows another writer could have left: (column, value it is overwritten with, what the
# failed attempt's last_error must say).
CORRUPTED = [
    ("payload", "{not json", ["DecodeError", "payload of Chaos is not valid JSON"]),
    ("payload", "[1, 2, 3]", ["DecodeError", "payload of Chaos must be a JSON object, got list"]),
    ("class_name", "no.such.Class", ["DecodeError", "unknown job class 'no.such.Class'"]),
    (
        "payload",
        '{"journal": "/dev/null"}',
        ["DecodeError", "does not fit Chaos", "missing field(s) seconds"],
    ),
]

# How each Raise job's attempt must be described (tests/support/apps/chaos_app.py RAISERS).
RAISED = {
    "ValueError": ["ValueError: a bad value"],
    "RecursionError": ["RecursionError: maximum recursion depth exceeded"],
    "MemoryError": ["MemoryError: raised, not run out of"],
    "Halt": ["chaos_app.Halt: a BaseException subclass"],
    "SystemExit": ["SystemExit: 3"],
    "KeyboardInterrupt": ["KeyboardInterrupt: inside a job"],
    "GeneratorExit": ["GeneratorExit: raised inside a job"],
    "Unprintable": ["chaos_app.Unprintable: <exception str() failed>"],
    # Not an exception at all: the worker process ends with the job in hand.
    "os._exit": ["The worker died (worker ", "exit code 7)"],
}


def overwrite(queue: jobq.Queue, db_kind: str, job_id: int, column: str, value: str) -> None:
    """Change a stored row behind jobq's back, as another application's writer could."""
    mark = "?" if db_kind == "sqlite" else "%s"  # the drivers' parameter styles
    queue.backend.execute(
        f"UPDATE jobq_jobs SET {column} = {mark} WHERE id = {mark}", (value, job_id)
    )


def padded(journal: str, size: int) -> Padded:
    """A job whose stored payload is exactly `size` bytes."""
    _, empty = jobq.JsonCodec().encode(Padded("", journal))
    job = Padded("x" * (size - len(empty.encode())), journal)
    assert len(jobq.JsonCodec().encode(job)[1].encode()) == size
    return job


def test_bad_jobs_fail_their_attempt_and_the_supervisor_keeps_running(
    dsn: str, db_kind: str, tmp_path: Path
) -> None:
    journal = str(tmp_path / "journal")
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        expected: dict[int, list[str]] = {}
        for column, value, texts in CORRUPTED:
            job_id = queue.enqueue(Chaos(0, journal), retry=ONCE)
            overwrite(queue, db_kind, job_id, column, value)
            expected[job_id] = texts
        for kind, texts in RAISED.items():
            expected[queue.enqueue(Raise(kind, journal), retry=ONCE)] = texts

        # One byte over the limit is refused at enqueue, saying why; nothing is stored.
        with pytest.raises(ValueError, match=r"Padded: payload of 8\.0 MiB is over jobq's limit"):
            queue.enqueue(padded(journal, MAX_PAYLOAD_BYTES + 1))
        # One byte under it is stored, claimed and run like any other job.
        big_job = padded(journal, MAX_PAYLOAD_BYTES - 1)
        big = queue.enqueue(big_job, retry=ONCE)
        good = [queue.enqueue(Chaos(0.01, journal)) for _ in range(4)]
        assert queue.counts() == {"pending": len(expected) + 1 + len(good)}

        with supervisor(dsn, "--workers", "2", "--app", "chaos_app", *FAST) as running:
            settled = {"failed": len(expected), "completed": 1 + len(good)}
            wait_for(
                f"every job to be settled; log:\n{running.log}",
                lambda: queue.counts() == settled,
                timeout=60,
            )
            for job_id, texts in expected.items():
                record = queue.get(job_id)
                assert record is not None
                assert (record.status, record.attempts) == (jobq.Status.FAILED, 1), record
                for text in texts:
                    assert text in (record.last_error or ""), (text, record.last_error)
            record = queue.get(big)
            assert record is not None, record
            assert record.status is jobq.Status.COMPLETED, record
            # It ran with all of its payload.
            sizes = [e["size"] for e in read_journal(journal) if "size" in e]
            assert sizes == [len(big_job.padding)]

            # Still the same master, running, and still taking work.
            assert running.process.poll() is None, running.log
            later = queue.enqueue(Chaos(0, journal))
            wait_for(
                "a job enqueued after all that to complete",
                lambda: (
                    (record := queue.get(later)) is not None
                    and record.status is jobq.Status.COMPLETED
                ),
                timeout=30,
            )
            running.signal(signal.SIGTERM)
            assert running.wait(30) == 0, running.log
    assert "crash_loop" not in running.log
    assert "keep exiting" not in running.log


# -- jobq-supervise's command line --------------------------------------------------------


def supervise(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobq.supervisor", *args],
        env={**os.environ, "PYTHONPATH": str(APPS), **(env or {})},
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--workers", "0"], {}, "argument --workers: must be a whole number of at least 1, got 0"),
        (["--workers", "many"], {}, "argument --workers: not a whole number: 'many'"),
        ([], {"JOBQ_WORKERS": "-2"}, "JOBQ_WORKERS: must be a whole number of at least 1, got -2"),
        (["--max-jobs-per-child", "0"], {}, "--max-jobs-per-child: must be a whole number of at"),
        (["--prefetch", "1001"], {}, "argument --prefetch: must be at most 1000, got 1001: a"),
        ([], {"JOBQ_PREFETCH": "5000"}, "JOBQ_PREFETCH: must be at most 1000, got 5000: a"),
        (["--max-memory-per-child", "0"], {}, "--max-memory-per-child: must be a positive num"),
        (["--job-timeout", "inf"], {}, "argument --job-timeout: must be a positive number"),
        (["--graceful-timeout", "-1"], {}, "argument --graceful-timeout: must be a positive"),
        (["--poll-interval", "0"], {}, "argument --poll-interval: must be a positive number"),
        (["--maintenance-interval", "x"], {}, "argument --maintenance-interval: not a number"),
        (["--metrics-port", "70000"], {}, "--metrics-port: must be a port number from 0 to 65535"),
        (["--metrics-port", "-1"], {}, "--metrics-port: must be a port number from 0 to 65535"),
        (["--log-format", "xml"], {}, "--log-format: must be one of plain, json, got 'xml'"),
        (["--app", "no_such_app_module"], {}, "cannot import --app 'no_such_app_module'"),
    ],
)
def test_bad_supervisor_options_are_refused_cleanly(
    dsn: str, args: list[str], env: dict[str, str], message: str
) -> None:
    result = supervise("--dsn", dsn, "--lease", "60", *args, env=env)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert "Spawned worker" not in result.stderr


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize("fault", ["unknown-address", "port-in-use"])
def test_a_metrics_address_that_cannot_be_served_is_refused_cleanly(dsn: str, fault: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        if fault == "unknown-address":
            args = ["--metrics-address", "no-such-host.invalid", "--metrics-port", "0"]
        else:
            args = ["--metrics-port", str(taken.getsockname()[1])]
        result = supervise("--dsn", dsn, "--lease", "60", *args)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "metrics" in result.stderr


# -- bugs found by these tests, now fixed ------------------------------------------------


def both_counted(port: int) -> dict[tuple[tuple[str, str], ...], float] | None:
    """jobq_jobs_failed_total by its labels, once it counts two attempts."""
    found = scrape(port).values("jobq_jobs_failed_total")
    return found if sum(found.values()) == 2 else None


@pytest.mark.databases("sqlite")
def test_an_attempt_ended_by_system_exit_and_retried_is_counted_as_retried(
    dsn: str, tmp_path: Path
) -> None:
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        retry = jobq.RetryPolicy(max_attempts=2, backoff=0)
        queue.enqueue(Raise("SystemExit", str(tmp_path / "journal")), retry=retry)
        args = ("--workers", "1", "--app", "chaos_app", "--metrics-port", "0", *FAST)
        with supervisor(dsn, *args) as running:
            port = metrics_port(running)
            wait_for("both attempts to fail", lambda: queue.counts() == {"failed": 1})
            failed = wait_for("both attempts to be counted", lambda: both_counted(port))
            running.signal(signal.SIGTERM)
            assert running.wait(30) == 0, running.log
    by_outcome = {dict(labels)["outcome"]: n for labels, n in failed.items()}
    assert (by_outcome["retried"], by_outcome["failed"]) == (1, 1), by_outcome
