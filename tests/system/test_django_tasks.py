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

    # The signal receivers note each signal as an order's receipt.
    for name in ids:
        attempts = after[name]["attempts"]
        assert notes.count(f"enqueued {ids[name]} READY") == 1
        assert notes.count(f"started {ids[name]} RUNNING") == attempts, name
        assert len([n for n in notes if n.startswith(f"finished {ids[name]} ")]) == attempts


@pytest.mark.databases("postgresql", "sqlite", "mariadb")
def test_the_backend_under_djangos_test_runner(dsn: str) -> None:
    """tests/support/djangoproject/orders/test_tasks.py: enqueue in a TestCase's transaction,
    aenqueue and aget_result, priority order, the system checks and per-task options, and a
    row naming a function no task defines, which must import nothing."""
    output = ok(manage(dsn, "test", "orders.test_tasks", "--noinput"))
    assert "Ran 9 tests" in output, output
    assert "\nOK" in output, output
