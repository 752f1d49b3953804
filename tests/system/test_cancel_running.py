"""Cancelling a job while jobq-supervise runs it: the master learns of it from a renewal
round, stops the attempt through the fencing path (SIGTERM, then SIGKILL at the kill grace,
every process of the attempt), and the job ends cancelled, never retried. The history
checker judges that no process of the attempt outlived it unseen.

Pausing: no worker claims a paused type, and resuming wakes the idle ones; so does a retry."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

import jobq
from jobq.records import Status
from jobq.testing.history import check, read_journal
from tests.support.apps.supervised_app import Sleep, Yielding
from tests.support.attempts import KINDS, LEASE, enqueued, stop
from tests.support.supervising import (
    FAST,
    Supervisor,
    events,
    metrics_port,
    scrape,
    supervisor,
    wait_for_events,
)
from tests.support.waiting import wait_for

# SIGTERM first, SIGKILL half a second later (the most the timing rule leaves on FAST's
# 6 s lease): a job that ignores the TERM, or holds the GIL, is killed.
GRACE = ("--kill-grace", "0.5")


pytestmark = pytest.mark.lease(LEASE)


def status_is(queue: jobq.Queue, job_id: int, status: Status) -> bool:
    record = queue.get(job_id)
    return record is not None and record.status is status


def wait_completed(queue: jobq.Queue, job_id: int, running: Supervisor, timeout: float) -> None:
    wait_for(
        f"job {job_id} to complete; log:\n{running.log}",
        lambda: status_is(queue, job_id, Status.COMPLETED),
        timeout,
    )


@pytest.mark.parametrize("kind", KINDS)
def test_a_running_job_cancelled_is_stopped_whole_and_ends_cancelled(
    queue: jobq.Queue, dsn: str, tmp_path: Path, kind: str
) -> None:
    with enqueued(queue, dsn, tmp_path, kind) as case:
        with case.supervise(*GRACE, "--metrics-port", "0") as running:
            port = metrics_port(running)
            pids = case.first_attempt_started(running, kind)
            assert queue.cancel(case.job_id)
            # The next renewal round (every second here) tells the master; the stop then
            # takes at most the kill grace.
            case.wait_gone(pids, LEASE, running)
            running.wait_for_log(f"Job {case.job_id} was cancelled: stopped worker", timeout=5)
            wait_for(
                f"job {case.job_id} to end cancelled; log:\n{running.log}",
                lambda: status_is(queue, case.job_id, Status.CANCELLED),
            )
            scraped = wait_for(
                "the cancelled attempt in the metrics",
                lambda: (
                    s
                    if (s := scrape(port)).value("jobq_jobs_failed_total", outcome="cancelled")
                    else None
                ),
            )
            assert scraped.value("jobq_workers_killed_total", reason="cancelled") == 1
            stop(running)
        entries = read_journal(case.journal)
        record = queue.get(case.job_id)
        assert record is not None, record
        assert record.attempts == 1, record
        assert record.last_error is not None
        assert "Cancelled by an operator" in record.last_error
        report = check(entries, [record], case.deaths.exits_for(entries))
        assert report.ok, f"{report.summary()}\n{entries}"
        assert report.unfinished, "the attempt was not cut short: the test proved nothing"


@pytest.mark.databases("postgresql", "sqlite")
@pytest.mark.databases("postgresql")
def test_a_stop_belongs_to_its_attempt_the_next_job_is_never_killed_for_it(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    """A cancelled job whose own SIGTERM handler returns ends its attempt before the kill
    grace. The SIGKILL that was to follow is called off, and the worker, told to drain,
    claims nothing more: the job queued behind runs whole, once, and is not failed with the
    first one's reason. (Before, the worker claimed it with its acknowledgement, and the
    stop's SIGKILL hit it.)"""
    journal = tmp_path / "journal"
    first = queue.enqueue(Yielding(str(journal)), priority=10, retry=jobq.RetryPolicy(1))
    behind = queue.enqueue(Sleep(4, str(journal)))
    # A lease far longer than the test, and a kill grace that ends inside the second job.
    settings = (*FAST, "--lease", "60", "--kill-grace", "2", "--workers", "1")
    with supervisor(dsn, *settings, "--prefetch", "1") as running:
        wait_for_events(journal, "start")
        assert queue.cancel(first)
        wait_for(f"job {first} to end cancelled", lambda: status_is(queue, first, Status.CANCELLED))
        wait_completed(queue, behind, running, 30)
        running.signal(signal.SIGTERM)
        assert running.wait(30) == 0, running.log
    record = queue.get(behind)
    assert record is not None
    assert (record.attempts, record.last_error) == (1, None), record
    starts, ends = events(journal, "start", behind), events(journal, "end", behind)
    assert (len(starts), len(ends)) == (1, 1), read_journal(journal)
    assert events(journal, "end", first)[0]["stopped"], "the first job was not stopped"


def test_a_paused_type_waits_while_others_run_and_resuming_wakes_an_idle_worker(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    journal = str(tmp_path / "journal")
    queue.pause("sleep")
    held = queue.enqueue(Sleep(0, journal))
    other = queue.enqueue(Sleep(0, journal), type="other")
    # A long poll: on PostgreSQL only the resume's wake-up can start the paused job soon.
    poll = ("--poll-interval", "60") if dsn.startswith("postgresql") else ()
    with supervisor(dsn, "--workers", "1", *FAST, *poll, "--metrics-port", "0") as running:
        port = metrics_port(running)
        wait_for(
            f"the other type to run; log:\n{running.log}",
            lambda: status_is(queue, other, Status.COMPLETED),
        )
        assert status_is(queue, held, Status.PENDING)
        scraped = scrape(port)
        assert scraped.value("jobq_type_paused", type="sleep") == 1, scraped.text
        assert scraped.value("jobq_type_paused", type="other") == 0, scraped.text
        assert queue.resume("sleep")
        woken_then_stopped(queue, running, held, "resumed")


def woken_then_stopped(queue: jobq.Queue, running: Supervisor, job_id: int, how: str) -> None:
    """The job just made ready runs soon (far sooner than a long poll), then the supervisor
    is stopped."""
    wait_for(
        f"the {how} job to run; log:\n{running.log}",
        lambda: status_is(queue, job_id, Status.COMPLETED),
        timeout=20,
    )
    running.signal(signal.SIGTERM)
    assert running.wait(30) == 0, running.log


def idle(running: Supervisor) -> bool:
    return any(title.endswith("worker idle") for title in running.titles().values())


@pytest.mark.databases("postgresql")
def test_a_retry_wakes_an_idle_worker(queue: jobq.Queue, dsn: str, tmp_path: Path) -> None:
    journal = str(tmp_path / "journal")
    cancelled = queue.enqueue(Sleep(0, journal))
    assert queue.cancel(cancelled)
    first = queue.enqueue(Sleep(0, journal))
    # A poll far longer than the wait below: only the retry's wake-up can start the job.
    with supervisor(dsn, "--workers", "1", *FAST, "--poll-interval", "60") as running:
        wait_for(
            f"the first job to run; log:\n{running.log}",
            lambda: status_is(queue, first, Status.COMPLETED),
        )
        # Its title says idle once it found nothing more to claim and waits.
        wait_for("an idle worker", lambda: idle(running))
        assert queue.retry(cancelled)
        woken_then_stopped(queue, running, cancelled, "retried")
