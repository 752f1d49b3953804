"""JobqBackend against what Django's ImmediateBackend is tested to do (Django's
tests/tasks/test_immediate_backend.py), each behaviour run on both backends: a task's result
once it ran (status, times, arguments, return value, errors), aenqueue, takes_context, the
task signals as django.tasks logs them, and the queues a backend accepts. ImmediateBackend
runs a task as it is enqueued; on JobqBackend the enqueue stores it and jobq's worker loop
(queue_for().process_jobs(), with the hooks a worker runs) runs it, then the result is read
back. What only one of them does is tested apart, at the end (docs/guides/django.md says why).
Run by tests/system/test_django_tasks.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection, connections, transaction
from django.test import TransactionTestCase, override_settings
from django.utils import timezone

from jobq.contrib.django import queue_for
from jobq.contrib.django.task_api import InvalidTask, TaskResult, TaskResultStatus, task_backends
from orders import parity_tasks as tasks

try:
    import django.tasks  # noqa: F401

    LOGGER = "django.tasks"
    IMMEDIATE = "django.tasks.backends.immediate.ImmediateBackend"
except ImportError:
    LOGGER = "django_tasks"
    IMMEDIATE = "django_tasks.backends.immediate.ImmediateBackend"

JOBQ = "jobq.contrib.django.tasks.JobqBackend"
# One attempt, as ImmediateBackend makes: the project's own setting allows two.
ONE_ATTEMPT = {"RETRY": {"max_attempts": 1}}


def backend(path: str, queues: list[str] | None = None) -> dict[str, Any]:
    options = {"OPTIONS": ONE_ATTEMPT} if path == JOBQ else {}
    return {"default": {"BACKEND": path, "QUEUES": [] if queues is None else queues, **options}}


class SameOnBoth:
    """The behaviours both backends share. A subclass names its backend and how a result
    it returned comes to be finished."""

    BACKEND = ""

    def setUp(self) -> None:
        # TransactionTestCase flushes the models' tables only: jobq's are not models.
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM jobq_jobs")
        settings = override_settings(TASKS=backend(self.BACKEND))
        settings.enable()
        self.addCleanup(settings.disable)  # type: ignore[attr-defined]

    def ran(self, result: TaskResult[Any, Any]) -> TaskResult[Any, Any]:
        raise NotImplementedError

    def ran_in_a_thread(self, result: TaskResult[Any, Any]) -> TaskResult[Any, Any]:
        try:
            return self.ran(result)
        finally:
            connections.close_all()  # this thread's, which the test database must lose

    def assert_finished(self, result: TaskResult[Any, Any], status: str) -> None:
        test: Any = self
        test.assertEqual(result.status, status)
        test.assertIs(result.is_finished, True)
        test.assertIsNotNone(result.last_attempted_at)
        test.assertGreaterEqual(result.started_at, result.enqueued_at)
        test.assertGreaterEqual(result.finished_at, result.started_at)
        test.assertEqual(result.attempts, 1)

    def test_a_task_runs_with_its_arguments_to_success(self) -> None:
        test: Any = self
        for task in (tasks.nothing, tasks.nothing_async):
            with test.subTest(task=task.name):
                result = self.ran(task.enqueue(1, two=3))
                self.assert_finished(result, TaskResultStatus.SUCCESSFUL)
                test.assertIsNone(result.return_value)
                test.assertEqual(result.task, task)
                test.assertEqual((result.args, result.kwargs), ([1], {"two": 3}))

    async def test_aenqueue_runs_a_task_too(self) -> None:
        test: Any = self
        for task in (tasks.nothing, tasks.nothing_async):
            with test.subTest(task=task.name):
                # Off the event loop's thread, as a worker is: an async task gets a loop.
                ran = sync_to_async(self.ran_in_a_thread, thread_sensitive=False)
                result = await ran(await task.aenqueue())
                self.assert_finished(result, TaskResultStatus.SUCCESSFUL)
                test.assertEqual((result.args, result.kwargs), ([], {}))

    def test_the_return_value_is_kept(self) -> None:
        test: Any = self
        result = self.ran(task_backends["default"].enqueue(tasks.answer, [], {}))
        test.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
        test.assertEqual(result.return_value, 42)

    def test_what_a_task_raises_fails_it_with_its_traceback(self) -> None:
        test: Any = self
        with test.assertLogs(LOGGER, "ERROR") as logs:
            result = self.ran(tasks.refuses.enqueue("bad input"))
        test.assertEqual(len(logs.output), 1)
        test.assertIn("state=FAILED", logs.output[0])
        # The receiver logs with logger.exception: no stray exception of the backend's own.
        test.assertNotIn("RuntimeError", logs.output[0])
        self.assert_finished(result, TaskResultStatus.FAILED)
        with test.assertRaisesMessage(ValueError, "Task failed"):
            result.return_value  # noqa: B018
        test.assertEqual(result.errors[0].exception_class, ValueError)
        traceback = result.errors[0].traceback
        test.assertTrue(traceback.startswith("Traceback (most recent call last):"), traceback)
        test.assertTrue(traceback.endswith("ValueError: bad input\n"), traceback)

    def test_a_nested_exception_or_a_return_value_json_cannot_hold_fails_the_task(self) -> None:
        test: Any = self
        for task, exception, shown in (
            (tasks.wrapped, ValueError, 'ValueError(ValueError("the inner one"))'),
            (tasks.unstorable, TypeError, "Unsupported type"),
        ):
            with test.subTest(task=task.name), test.assertLogs(LOGGER, "ERROR"):
                result = self.ran(task.enqueue())
            self.assert_finished(result, TaskResultStatus.FAILED)
            test.assertIsNone(result._return_value)
            test.assertEqual(result.errors[0].exception_class, exception)
            test.assertIn(shown, result.errors[0].traceback)

    def test_a_task_taking_its_context_reads_its_own_result(self) -> None:
        result = self.ran(tasks.own_id.enqueue())
        test: Any = self
        test.assertEqual(result.return_value, result.id)

    def test_the_signals_log_the_enqueue_the_start_and_the_end(self) -> None:
        test: Any = self
        for task, status in ((tasks.nothing, "SUCCESSFUL"), (tasks.refuses, "FAILED")):
            with test.subTest(task=task.name), test.assertLogs(LOGGER, "DEBUG") as logs:
                result = self.ran(task.enqueue("no"))
            test.assertEqual(len(logs.output), 3, logs.output)
            enqueued, started, finished = logs.output
            test.assertIn("enqueued", enqueued)
            test.assertIn("state=RUNNING", started)
            test.assertIn(f"state={status}", finished)
            for line in logs.output:
                test.assertIn(result.id, line)
            if status == "SUCCESSFUL":
                test.assertNotIn("NoneType", "".join(logs.output))

    def test_a_queue_the_backend_does_not_list_is_refused(self) -> None:
        test: Any = self
        refused = test.assertRaisesMessage(InvalidTask, "Queue 'elsewhere' is not valid for")
        with override_settings(TASKS=backend(self.BACKEND, queues=["queue-1"])), refused:
            tasks.nothing.using(queue_name="elsewhere").enqueue()

    async def test_a_queue_the_backend_does_not_list_is_refused_by_aenqueue(self) -> None:
        test: Any = self
        refused = test.assertRaisesMessage(InvalidTask, "Queue 'elsewhere' is not valid for")
        with override_settings(TASKS=backend(self.BACKEND, queues=["queue-1"])), refused:
            await tasks.nothing.using(queue_name="elsewhere").aenqueue()


class OnImmediateBackend(SameOnBoth, TransactionTestCase):
    BACKEND = IMMEDIATE

    def ran(self, result: TaskResult[Any, Any]) -> TaskResult[Any, Any]:
        return result  # it ran as it was enqueued


class OnJobqBackend(SameOnBoth, TransactionTestCase):
    BACKEND = JOBQ

    def ran(self, result: TaskResult[Any, Any]) -> TaskResult[Any, Any]:
        self.assertEqual(result.status, TaskResultStatus.READY)
        self.assertEqual(queue_for().process_jobs(10), 1)
        result.refresh()
        return result

    # What jobq does that ImmediateBackend does not.

    def test_get_result_and_refresh_read_the_stored_result(self) -> None:
        enqueued = tasks.answer.enqueue()
        self.assertEqual(tasks.answer.get_result(enqueued.id).status, TaskResultStatus.READY)
        queue_for().process_jobs(1)
        stored = tasks.answer.get_result(enqueued.id)
        self.assertEqual((stored.status, stored.return_value), (TaskResultStatus.SUCCESSFUL, 42))
        enqueued.refresh()
        self.assertEqual(enqueued.finished_at, stored.finished_at)

    def test_run_after_defers_the_task(self) -> None:
        later = timezone.now() + timedelta(hours=1)
        result = tasks.nothing.using(run_after=later).enqueue()
        self.assertEqual(queue_for().process_jobs(10), 0)
        result.refresh()
        self.assertEqual((result.status, result.task.run_after), (TaskResultStatus.READY, later))

    def test_system_exit_fails_the_task_and_ends_the_process_running_it(self) -> None:
        result = tasks.exits.enqueue("leaving")
        with self.assertRaises(SystemExit):
            queue_for().process_jobs(10)
        result.refresh()
        self.assertEqual(result.status, TaskResultStatus.FAILED)
        self.assertEqual(result.errors[0].exception_class, SystemExit)
        self.assertTrue(result.errors[0].traceback.endswith("SystemExit: leaving\n"))

    def test_an_enqueue_belongs_to_the_callers_transaction(self) -> None:
        with transaction.atomic():
            result = tasks.nothing.enqueue()
            self.assertEqual(result.status, TaskResultStatus.READY)
        self.assertEqual(self.ran(result).status, TaskResultStatus.SUCCESSFUL)


class OnlyOnImmediateBackend(TransactionTestCase):
    """What ImmediateBackend does that JobqBackend does not: kept here, so that a change in
    Django's backend shows up beside the difference the guide describes."""

    @override_settings(TASKS=backend(IMMEDIATE))
    def test_it_refuses_run_after_and_get_result(self) -> None:
        with self.assertRaisesMessage(InvalidTask, "does not support run_after"):
            task_backends["default"].validate_task(tasks.nothing.using(run_after=timezone.now()))
        with self.assertRaises(NotImplementedError):
            task_backends["default"].get_result("1")

    @override_settings(TASKS=backend(IMMEDIATE))
    def test_system_exit_only_fails_the_task(self) -> None:
        with self.assertLogs(LOGGER, "ERROR"):
            result = tasks.exits.enqueue("staying")
        self.assertEqual(result.status, TaskResultStatus.FAILED)

    @override_settings(TASKS=backend(IMMEDIATE))
    def test_it_runs_inside_the_callers_transaction(self) -> None:
        with transaction.atomic():
            result = tasks.nothing.enqueue()
            self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
