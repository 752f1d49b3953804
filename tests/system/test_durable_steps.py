"""Durable steps under real kills: a worker of `jobq-supervise` SIGKILLed after each step's
record committed, in turn, and once inside a step, before its record; and a supervisor
frozen (SIGSTOP) inside a step past its lease while another runs the job. Judged from the
steps' own journal: no step whose record committed ran again, a step cut short ran again
with the same step_key(), and only the attempt holding the job recorded a step."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import psutil
import pytest

import jobq
from chaos.observe import Deaths
from tests.support.attempts import stop
from tests.support.gather_jobs import Parent
from tests.support.step_jobs import (
    AsyncSleeper,
    AsyncSteps,
    Ledger,
    Sleeper,
    Steps,
    Waiter,
    entries,
)
from tests.support.supervising import FAST, Scrape, Supervisor, metrics_port, scrape, supervisor
from tests.support.waiting import wait_for, wait_lease_ended

RETRY = jobq.RetryPolicy(max_attempts=10, backoff=0.2, max_backoff=0.2, jitter=False)
APP = ("--app", "tests.support.step_jobs", *FAST)
# Kill attempt n (from 1) once step KILLS[n-1][1] journaled KILLS[n-1][0]: after the
# records of steps 0 to 3, then inside step 4, before its record.
KILLS = [("recorded", 0), ("recorded", 1), ("recorded", 2), ("recorded", 3), ("ran", 4)]


class Worker(NamedTuple):
    """A kind of worker, with the jobs written for it."""

    args: tuple[str, ...]
    steps: type[Steps]
    sleeper: type[Sleeper]


@pytest.fixture(params=["process", "coroutine"])
def worker(request: pytest.FixtureRequest) -> Worker:
    if request.param == "process":
        return Worker((), Steps, Sleeper)
    return Worker(("--concurrency", "2"), AsyncSteps, AsyncSleeper)


def at(journal: Path, event: str, step: int, attempt: int) -> list[dict[str, Any]]:
    return [
        e
        for e in entries(journal)
        if (e["event"], e["step"], e["attempt"]) == (event, step, attempt)
    ]


def completed(queue: jobq.Queue, job_id: int) -> bool:
    record = queue.get(job_id)
    return record is not None and record.status is jobq.Status.COMPLETED


def test_no_step_whose_record_committed_runs_again_after_its_worker_is_killed(
    queue: jobq.Queue, dsn: str, tmp_path: Path, worker: Worker
) -> None:
    journal = tmp_path / "journal"
    job_id = queue.enqueue(worker.steps(5, str(journal), pause=0.5), retry=RETRY)
    with Deaths() as deaths, supervisor(dsn, "--workers", "1", *worker.args, *APP) as running:
        deaths.family(running.pid)
        for attempt, (event, step) in enumerate(KILLS, start=1):
            what = f"attempt {attempt} to journal {event} {step}; log:\n{running.log}"
            (entry,) = wait_for(what, lambda: at(journal, event, step, attempt), 60)  # noqa: B023
            assert deaths.kill(entry["pid"]), f"worker {entry['pid']} was gone already"
            assert deaths.wait_gone([entry["pid"]], 10), f"worker {entry['pid']} survived"
        wait_for(f"the job to complete; log:\n{running.log}", lambda: completed(queue, job_id))
        stop(running)

    ran = [(e["step"], e["attempt"], e["key"]) for e in entries(journal) if e["event"] == "ran"]
    # Steps 0 to 3 ran once each, in attempts 1 to 4; step 4, cut short in attempt 5, ran
    # again in attempt 6 with the same key. Replays ran nothing.
    keys = [f"jobq-{job_id}-step-{n}" for n in range(5)]
    once = [(n, n + 1, keys[n]) for n in range(4)]
    assert ran == [*once, (4, 5, keys[4]), (4, 6, keys[4])]
    recorded = [(step.name, step.attempt) for step in queue.backend.step_records(job_id)]
    assert sorted(recorded) == [*((f"step-{n}", n + 1) for n in range(4)), ("step-4", 6)]
    record = queue.wait(job_id, timeout=0)
    assert record.result == [{"n": n, "key": keys[n]} for n in range(5)]


def processes(running: Supervisor) -> list[psutil.Process]:
    master = psutil.Process(running.pid)
    return [master, *master.children(recursive=True)]


@contextmanager
def frozen(running: Supervisor) -> Iterator[None]:
    """The supervisor and every process under it stopped, master first, then resumed."""
    stopped = processes(running)
    for process in stopped:
        process.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        for process in stopped:
            if process.is_running():
                process.send_signal(signal.SIGCONT)


def test_a_step_whose_attempt_was_frozen_past_its_lease_is_recorded_only_by_the_next(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    job_id = queue.enqueue(Steps(1, str(journal), pause=3.0), retry=RETRY)
    with supervisor(dsn, "--workers", "1", *APP) as first:
        what = f"attempt 1 to enter its step; log:\n{first.log}"
        (inside,) = wait_for(what, lambda: at(journal, "ran", 0, 1), 60)
        with frozen(first):
            wait_lease_ended(queue, job_id)
            with supervisor(dsn, "--workers", "1", *APP) as second:
                wait_for(
                    f"attempt 2 to complete; log:\n{second.log}", lambda: completed(queue, job_id)
                )
                stop(second)
        # Resumed, attempt 1 either finds its record refused or is fenced (killed) first.
        wait_for(
            f"attempt 1 to end; log:\n{first.log}",
            lambda: (
                not psutil.pid_exists(inside["pid"]) or "step 'step-0' not recorded" in first.log
            ),
        )
        stop(first)
    ran = [(e["attempt"], e["event"]) for e in entries(journal)]
    assert ran == [(1, "ran"), (2, "ran"), (2, "recorded")], ran
    recorded = [(step.name, step.attempt) for step in queue.backend.step_records(job_id)]
    assert recorded == [("step-0", 2)]


def test_sleeping_jobs_hold_no_worker_and_each_wakes_once_past_its_sleep(
    queue: jobq.Queue, dsn: str, tmp_path: Path, worker: Worker
) -> None:
    journal, once = tmp_path / "journal", jobq.RetryPolicy(max_attempts=1)
    sleepers = [queue.enqueue(worker.sleeper(str(journal), 3.0), retry=once) for _ in range(3)]
    with supervisor(dsn, "--workers", "1", *worker.args, *APP) as running:
        wait_for(
            f"the sleepers to complete; log:\n{running.log}",
            lambda: all(completed(queue, job_id) for job_id in sleepers),
        )
        stop(running)
    steps = [(e["job"], e["step"], e["attempt"]) for e in entries(journal)]
    # More sleepers than slots (one worker, one or two): each got to its sleep before any
    # woke, so none held its slot while it slept.
    assert sorted(steps[:3]) == [(job_id, 0, 1) for job_id in sleepers]
    assert sorted(steps[3:]) == [(job_id, 1, 2) for job_id in sleepers]


def test_a_worker_killed_between_a_transactional_step_s_write_and_its_record_leaves_neither(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    queue.backend.execute("CREATE TABLE ledger (job_id BIGINT NOT NULL, attempt INT NOT NULL)")
    journal = tmp_path / "journal"
    job_id = queue.enqueue(Ledger(str(journal), pause=1.0), retry=RETRY)
    with Deaths() as deaths, supervisor(dsn, "--workers", "1", *APP) as running:
        deaths.family(running.pid)
        what = f"attempt 1 to write its row; log:\n{running.log}"
        (entry,) = wait_for(what, lambda: at(journal, "ran", 0, 1), 60)
        assert deaths.kill(entry["pid"]), f"worker {entry['pid']} was gone already"
        wait_for(f"the job to complete; log:\n{running.log}", lambda: completed(queue, job_id))
        stop(running)
    rows = [(int(a), int(b)) for a, b in queue.backend.fetchall("SELECT * FROM ledger")]
    assert rows == [(job_id, 2)]
    assert [(s.name, s.attempt) for s in queue.steps(job_id)] == [("debit", 2)]


def test_waiting_jobs_hold_no_worker_and_an_emit_wakes_each(
    queue: jobq.Queue, dsn: str, tmp_path: Path, worker: Worker
) -> None:
    journal, once = tmp_path / "journal", jobq.RetryPolicy(max_attempts=1)
    keys = [f"order-{n}:shipped" for n in range(3)]
    waiters = [queue.enqueue(Waiter(str(journal), key), retry=once) for key in keys]
    with supervisor(dsn, "--workers", "1", *worker.args, *APP) as running:
        # More waiters than slots: each reached its wait, so none holds a slot.
        wait_for(
            f"every waiter to reach its wait; log:\n{running.log}",
            lambda: len(entries(journal)) == 3,
        )
        for n, key in enumerate(keys):
            queue.emit(key, n)
        wait_for(
            f"the waiters to complete; log:\n{running.log}",
            lambda: all(completed(queue, job_id) for job_id in waiters),
        )
        stop(running)
    assert [queue.wait(job_id, timeout=0).result for job_id in waiters] == [0, 1, 2]
    assert sorted((e["job"], e["step"]) for e in entries(journal)) == sorted(
        (job_id, n) for job_id in waiters for n in (0, 1)
    )


@pytest.mark.parametrize("sizing", [(), ("--concurrency", "2")], ids=["process", "threads"])
def test_parents_gathering_children_hold_no_worker_and_get_their_results(
    queue: jobq.Queue, dsn: str, tmp_path: Path, sizing: tuple[str, ...]
) -> None:
    journal = str(tmp_path / "journal")
    parents = [queue.enqueue(Parent(journal, [n, n + 1])) for n in (1, 3, 5)]
    app = ("--app", "tests.support.gather_jobs", *FAST)
    with supervisor(dsn, "--workers", "1", *sizing, *app) as running:
        # Three parents, one or two slots: each parent must give its slot up to its children.
        wait_for(
            f"the parents to complete; log:\n{running.log}",
            lambda: all(completed(queue, job_id) for job_id in parents),
            120,
        )
        stop(running)
    assert [queue.wait(job_id, timeout=0).result for job_id in parents] == [
        [10, 20],
        [30, 40],
        [50, 60],
    ]


def test_a_suspension_counts_as_suspended_in_the_metrics_not_as_retried(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    job_id = queue.enqueue(Sleeper(str(tmp_path / "journal"), 1.0), retry=RETRY)
    with supervisor(dsn, "--workers", "1", *APP, "--metrics-port", "0") as running:
        port = metrics_port(running)
        wait_for(f"the sleeper to complete; log:\n{running.log}", lambda: completed(queue, job_id))
        scraped = wait_for("both attempts in the metrics", lambda: attempts_shown(port))
        stop(running)
    failed = "jobq_jobs_failed_total"
    assert scraped.value(failed, type="steps", outcome="suspended") == 1
    assert scraped.value(failed, type="steps", outcome="retried") == 0


def attempts_shown(port: int) -> Scrape | None:
    """The scrape once it counts the sleeper's completion: its one worker reports each
    attempt as it ends, in turn, so the suspension before it is counted too."""
    scraped = scrape(port)
    return scraped if scraped.value("jobq_jobs_completed_total", type="steps") == 1 else None
