"""Django's Tasks framework on jobq (JobqBackend) in the test project: tasks enqueued through
Django's API, run under `manage.py jobq supervise`, and read back as Django's TaskResult."""

from __future__ import annotations

import json
from typing import Any

import pytest

import jobq
from tests.support.supervising import FAST
from tests.system.test_django import manage, ok, stop, supervise


def shell(dsn: str, code: str, lines: int) -> list[Any]:
    """Run `code` in `manage.py shell` (each start of Django costs a second or two): the
    last `lines` lines it printed, each as JSON."""
    output = ok(manage(dsn, "shell", "-v", "0", "-c", code))
    return [json.loads(line) for line in output.strip().splitlines()[-lines:]]


@pytest.mark.databases("postgresql", "sqlite", "mariadb")
def test_tasks_run_under_supervise_and_read_back_as_djangos_results(dsn: str) -> None:
    ok(manage(dsn, "migrate", "--noinput"))
    code = "import json; from orders.tasks import enqueue_all, report; ids = enqueue_all(); "
    ids, before = shell(dsn, code + "print(json.dumps(ids)); report(ids)", 2)
    assert all(isinstance(i, str) for i in ids.values())

    assert before["rolled_back"] is None  # its transaction rolled back: gone
    assert before["add"]["status"] == "READY"
    assert before["add"]["attempts"] == 0
    assert before["add"]["args"] == [2]
    assert before["add"]["kwargs"] == {"b": 3}
    assert (before["add"]["queue"], before["add"]["priority"]) == ("tasks", 10)

    assert before["tomorrow"]["deferred"]
    assert not before["add"]["deferred"]
    del ids["rolled_back"]
    tomorrow = ids.pop("tomorrow")
    run = [int(i) for i in ids.values()]
    # Three at once: plain tasks in the worker's threads, the async one on its event loop.
    with supervise(dsn, "--type", "tasks", "--concurrency", "3", *FAST) as running:
        with jobq.Queue.connect(dsn) as queue:
            try:
                for job_id in run:
                    queue.wait(job_id, timeout=90)
            except TimeoutError:
                pytest.fail(f"not every task finished; log:\n{running.log}")
        stop(running)
    code = f"from orders.tasks import notes, report; report({ids | {'tomorrow': tomorrow}!r}); "
    after, notes = shell(dsn, code + "notes()", 2)

    assert after["add"]["status"] == "SUCCESSFUL"
    assert after["add"]["return_value"] == {"sum": 5}
    assert after["add"]["attempts"] == 1
    assert after["add"]["started"]

    assert after["fails"]["status"] == "FAILED"  # RETRY allows 2 attempts
    assert after["fails"]["attempts"] == 2
    assert [e[0] for e in after["fails"]["errors"]] == ["builtins.ValueError"] * 2
    assert "ValueError: bad input" in after["fails"]["errors"][0][1]

    # takes_context: the second attempt sees attempt == 2, and the first one's error is kept.
    assert after["flaky"]["status"] == "SUCCESSFUL"
    assert after["flaky"]["return_value"] == 2
    assert [e[0] for e in after["flaky"]["errors"]] == ["builtins.RuntimeError"]
    assert len(after["flaky"]["worker_ids"]) == 2

    # An async task: a coroutine job on the worker's loop, with its context per attempt.
    assert after["later"]["return_value"] == {"value": "QUIET", "thread": "MainThread"}
    assert after["later"]["class"] == "jobq.contrib.django.tasks.AsyncTaskJob"
    assert [e[0] for e in after["later"]["errors"]] == ["builtins.RuntimeError"]

    assert after["tomorrow"]["status"] == "READY"  # run_after

    # The signal receivers note each signal as an order's receipt: task_finished carries
    # each attempt's outcome as recorded, the async task's too (sent off the event loop).
    for name in ids:
        attempts = after[name]["attempts"]
        assert notes.count(f"enqueued {ids[name]} READY") == 1
        assert notes.count(f"started {ids[name]} RUNNING") == attempts, name
        finished = [n.split()[-1] for n in notes if n.startswith(f"finished {ids[name]} ")]
        last = "FAILED" if name == "fails" else "SUCCESSFUL"
        # Each attempt's, whichever of the worker's threads sent it first.
        assert sorted(finished) == sorted(["READY"] * (attempts - 1) + [last]), (name, finished)
    # The start line lists the queues the backend declares, which its one job class serves.
    (line,) = [n for n in running.log.splitlines() if "job types defined: " in n]
    assert "tasks" in line.split("job types defined: ")[1].split(", "), line


@pytest.mark.databases("postgresql", "sqlite", "mariadb")
def test_the_backend_under_djangos_test_runner(dsn: str) -> None:
    """tests/support/djangoproject/orders/test_tasks.py: enqueue in a TestCase's transaction,
    aenqueue and aget_result, priority order, the system checks and per-task options, a task
    with durable steps, and a row naming a function no task defines, which must import nothing."""
    output = ok(manage(dsn, "test", "orders.test_tasks", "--noinput"))
    assert "Ran 10 tests" in output, output
    assert "\nOK" in output, output


@pytest.mark.databases("postgresql", "sqlite", "mariadb")
def test_task_results_read_as_djangos_own_backends_give_them(dsn: str) -> None:
    """tests/support/djangoproject/orders/test_task_results.py (issue 54): result ids, the
    run_after and enqueue time given, each task's own keys, queue names, every failed
    attempt in errors, task_finished once the outcome is recorded."""
    output = ok(manage(dsn, "test", "orders.test_task_results", "--noinput"))
    assert "Ran 10 tests" in output, output
    assert "\nOK" in output, output


@pytest.mark.databases("postgresql", "sqlite", "mariadb")
def test_django_tasks_monitor_records_how_each_task_ended(dsn: str) -> None:
    """django-tasks-monitor (pinned in the test extra, for Django 6), a dashboard for any
    django.tasks backend, keeps a record per task from the task signals alone: through a
    real worker, it reads SUCCESSFUL, and FAILED with the error (issue 54)."""
    pytest.importorskip("tasks_monitor", reason="Django 6 only: scripts/test-django6")
    ok(manage(dsn, "migrate", "--noinput"))
    code = (
        "import json; from orders.tasks import add, fails; "
        "print(json.dumps([add.enqueue(2, b=3).id, fails.enqueue('bad input').id]))"
    )
    (ids,) = shell(dsn, code, 1)
    with supervise(dsn, "--type", "tasks", *FAST) as running:
        with jobq.Queue.connect(dsn) as queue:
            try:
                for job_id in ids:
                    queue.wait(int(job_id), timeout=90)
            except TimeoutError:
                pytest.fail(f"not every task finished; log:\n{running.log}")
        stop(running)
    (records,) = shell(dsn, f"from orders.tasks import monitored; monitored({ids!r})", 1)
    succeeded, failed = records[ids[0]], records[ids[1]]
    assert succeeded == {
        "status": "SUCCESSFUL",
        "finished": True,
        "attempts": 1,
        "exception_class": "",
        "traceback": "",
    }
    assert (failed["status"], failed["finished"], failed["attempts"]) == ("FAILED", True, 2)
    assert failed["exception_class"] == "builtins.ValueError"
    assert "ValueError: bad input" in failed["traceback"]


@pytest.mark.databases("postgresql", "sqlite", "mariadb")
def test_the_backend_does_what_djangos_immediate_backend_is_tested_to_do(dsn: str) -> None:
    """tests/support/djangoproject/orders/test_backend_parity.py: the behaviours of Django's
    own ImmediateBackend tests, run on both backends, and each deliberate difference."""
    output = ok(manage(dsn, "test", "orders.test_backend_parity", "--noinput"))
    assert "Ran 25 tests" in output, output
    assert "\nOK" in output, output
