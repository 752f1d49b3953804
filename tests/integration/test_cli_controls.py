"""`jobq jobs`, `show`, `cancel`, `retry`, `pause` and `resume`, run in-process on every
database: what they print, what they change, and one clear line with exit 1 for bad input."""

from __future__ import annotations

import json
import logging

import pytest

import jobq
from jobq.cli.commands import main
from jobq.cli.controls import RECORD_KEYS
from jobq.queue.running import worker_id
from tests.support.jobs import Boom, Noop

ONCE = jobq.RetryPolicy(max_attempts=1)


@pytest.fixture
def jobq_(dsn: str, capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """Run `jobq ARGS --dsn DSN`: (exit code, stdout, stderr). main() points jobq's logger
    at this test's captured stderr; it is put back as it was afterwards, so that no later
    test logs to a stream already closed."""
    logger = logging.getLogger("jobq")
    saved = (logger.handlers[:], logger.level, logger.propagate)

    def run(*args: str) -> tuple[int, str, str]:
        code = main([*args, "--dsn", dsn])
        out, err = capsys.readouterr()
        return code, out, err

    yield run
    logger.handlers[:], logger.level, logger.propagate = saved


def test_jobs_lists_newest_first_as_text_and_stable_json(queue: jobq.Queue, jobq_) -> None:  # type: ignore[no-untyped-def]
    first = queue.enqueue(Noop(), priority=3)
    second = queue.enqueue(Noop(), type="mail")
    claim = queue.claim("mail")
    assert claim is not None
    code, out, _ = jobq_("jobs")
    header, *rows = out.splitlines()
    assert code == 0 and header.split()[:4] == ["id", "type", "status", "priority"]
    assert [row.split()[0] for row in rows] == [str(second), str(first)]
    assert "in_progress" in rows[0] and ":" in rows[0].split()[-1]  # host:pid
    code, out, _ = jobq_("jobs", "--json", "--type", "noop", "--limit", "5")
    (shown,) = json.loads(out)
    assert tuple(shown) == RECORD_KEYS
    assert (shown["id"], shown["priority"], shown["status"], shown["host"]) == (
        first,
        3,
        "pending",
        None,
    )
    code, out, _ = jobq_("jobs", "--json", "--status", "in_progress")
    assert [job["id"] for job in json.loads(out)] == [second]
    # The claim names the worker incarnation that made it: this process.
    code, out, _ = jobq_("show", str(second), "--json")
    assert json.loads(out)["worker"] == worker_id()
    assert "worker" in jobq_("show", str(second))[1]


def test_show_prints_one_job_or_one_line_why_not(queue: jobq.Queue, jobq_) -> None:  # type: ignore[no-untyped-def]
    job = queue.enqueue(Noop(), priority=-2, unique_key="import:customer-42")
    code, out, _ = jobq_("show", str(job), "--json")
    shown = json.loads(out)
    assert code == 0 and (shown["priority"], shown["unique_key"]) == (-2, "import:customer-42")
    code, out, _ = jobq_("show", str(job))
    assert code == 0 and "priority" in out and "pending" in out
    for bad, message in [(str(job + 99), "no job with id"), ("x1", "not a job id: 'x1'")]:
        code, out, err = jobq_("show", bad)
        assert (code, out) == (1, "")
        assert err.count("\n") == 1 and message in err


def test_cancel_acts_on_every_id_and_says_which_it_refused(queue: jobq.Queue, jobq_) -> None:  # type: ignore[no-untyped-def]
    done, running, pending = queue.enqueue_many([Noop(), Noop(), Noop()])
    queue.process_jobs(1)  # the first
    assert queue.claim() is not None  # the second, running
    code, out, err = jobq_("cancel", str(running), str(done), str(pending), str(done + 50))
    assert code == 1
    assert f"job {running} is being cancelled" in out and f"job {pending} cancelled" in out
    assert err.splitlines() == [
        f"jobq: job {done} not cancelled: it is completed already",
        f"jobq: job {done + 50} not cancelled: no such job",
    ]
    assert queue.counts() == {"completed": 1, "in_progress": 1, "cancelled": 1}


def test_retry_by_id_or_by_status_and_type(queue: jobq.Queue, jobq_) -> None:  # type: ignore[no-untyped-def]
    failed = [queue.enqueue(Boom(), retry=ONCE) for _ in range(3)]
    other = queue.enqueue(Boom(), type="other", retry=ONCE)
    queue.process_jobs(10)
    code, out, err = jobq_("retry", str(failed[0]), str(failed[0]))
    assert code == 1 and "retried 1 job(s)" in out
    assert f"job {failed[0]} is pending" in err
    code, out, _ = jobq_("retry", "--status", "failed", "--type", "boom")
    assert code == 0 and "retried 2 job(s)" in out
    assert queue.counts("boom") == {"pending": 3} and queue.counts("other") == {"failed": 1}
    code, out, err = jobq_("retry", "--status", "pending")
    assert code == 1 and out == "" and err.count("\n") == 1 and "can be retried" in err
    code, out, err = jobq_("retry", str(other), "--status", "failed")
    assert code == 1 and "not both" in err
    assert queue.get(other) is not None and queue.get(other).status == "failed"  # type: ignore[union-attr]


def test_pause_and_resume_a_type(queue: jobq.Queue, jobq_) -> None:  # type: ignore[no-untyped-def]
    queue.enqueue(Noop())
    assert jobq_("pause", "noop")[:2] == (0, "jobq: type 'noop' paused\n")
    assert jobq_("pause", "noop")[1] == "jobq: type 'noop' was paused already\n"
    assert queue.paused() == {"noop"} and queue.claim() is None
    assert jobq_("resume", "noop")[:2] == (0, "jobq: type 'noop' resumed\n")
    assert queue.claim() is not None
    code, out, err = jobq_("pause", "")
    assert (code, out) == (1, "") and err.count("\n") == 1
