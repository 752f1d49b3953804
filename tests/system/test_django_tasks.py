"""Django's Tasks framework on jobq (JobqBackend) in the test project: tasks enqueued through
Django's API, run under `manage.py jobq supervise`, and read back as Django's TaskResult."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.supervising import FAST
from tests.support.waiting import wait_for
from tests.system.test_django import manage, ok, stop, supervise


def shell(dsn: str, code: str) -> Any:
    """Run `code` in `manage.py shell`; what it printed last, as JSON."""
    output = ok(manage(dsn, "shell", "-v", "0", "-c", code))
    return json.loads(output.strip().splitlines()[-1])


def results(dsn: str, ids: dict[str, str]) -> dict[str, Any]:
    found: dict[str, Any] = shell(dsn, f"from orders.tasks import report; report({ids!r})")
    return found


@pytest.mark.databases("postgresql", "sqlite", "mariadb")
def test_tasks_run_under_supervise_and_read_back_as_djangos_results(dsn: str) -> None:
    ok(manage(dsn, "migrate", "--noinput"))
    ids: dict[str, str] = shell(dsn, "from orders.tasks import enqueue_all; enqueue_all()")
    assert all(isinstance(i, str) for i in ids.values())

    before = results(dsn, ids)
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
    # Three at once: plain tasks in the worker's threads, the async one on its event loop.
    with supervise(dsn, "--type", "tasks", "--concurrency", "3", *FAST) as running:

        def finished() -> bool:
            return all(r["finished"] for r in results(dsn, ids).values())

        wait_for(f"every task finished; log:\n{running.log}", finished, 90)
        stop(running)
    after = results(dsn, ids)

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

    # The signal receivers note each signal as an order's receipt.
    code = "import json; from orders.models import Order; "
    code += "print(json.dumps(list(Order.objects.values_list('receipt', flat=True))))"
    assert results(dsn, {"tomorrow": tomorrow})["tomorrow"]["status"] == "READY"  # run_after

    notes = shell(dsn, code)
    for name in ids:
        attempts = after[name]["attempts"]
        assert notes.count(f"enqueued {ids[name]} READY") == 1
        assert notes.count(f"started {ids[name]} RUNNING") == attempts, name
        assert len([n for n in notes if n.startswith(f"finished {ids[name]} ")]) == attempts


@pytest.mark.databases("postgresql", "sqlite", "mariadb")
def test_the_backend_under_djangos_test_runner(dsn: str) -> None:
    """tests/support/djangoproject/orders/test_tasks.py: enqueue in a TestCase's transaction,
    aenqueue and aget_result, priority order, the system checks and per-task options."""
    output = ok(manage(dsn, "test", "orders.test_tasks", "--noinput"))
    assert "Ran 7 tests" in output, output
    assert "\nOK" in output, output
