"""Django's Tasks API on JobqBackend under Django's own test runner (`manage.py test
orders.test_tasks`, from tests/system/test_django_tasks.py): enqueue in a test's
transaction, the async API, priority order, the system checks and jobq's per-task options."""

from __future__ import annotations

import sys
from datetime import timedelta

from django.core.checks import run_checks
from django.db import OperationalError, connection, transaction
from django.test import TestCase, TransactionTestCase, override_settings

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task

import jobq
from jobq.contrib.django import dsn, queue_for
from jobq.contrib.django.task_api import InvalidTask, TaskResultDoesNotExist
from jobq.contrib.django.tasks import TaskJob
from orders.locks import key_held
from orders.models import Order
from orders.tasks import add, ordered, ordered_async, receipt, stepped


def committed() -> dict[str, int]:
    """jobq's counts as another connection sees them: what has been committed."""
    with jobq.Queue.connect(dsn()) as own:
        return own.counts()


def plain() -> None:
    pass


class InATestCase(TestCase):
    """TestCase runs each test in a transaction it rolls back at the end."""

    def test_an_enqueue_is_in_the_tests_transaction_and_never_committed(self) -> None:
        result = add.enqueue(1, b=2)
        self.assertEqual(add.get_result(result.id).status, "READY")
        self.assertEqual(queue_for().counts(), {"pending": 1})
        self.assertEqual(committed(), {})

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        # The test's transaction rolled back, and the task with it.
        assert queue_for().counts() == {}, "the task outlived the test's transaction"

    async def test_aenqueue_and_aget_result(self) -> None:
        result = await add.aenqueue(2, b=3)
        found = await add.aget_result(result.id)
        self.assertEqual((found.id, found.status), (result.id, "READY"))
        self.assertEqual((found.args, found.kwargs), ([2], {"b": 3}))
        with self.assertRaises(TaskResultDoesNotExist):
            await add.aget_result("0")

    def test_an_unknown_queue_is_refused(self) -> None:
        with self.assertRaisesRegex(InvalidTask, "Queue 'elsewhere' is not valid"):
            add.using(queue_name="elsewhere")

    def test_the_system_checks_pass_and_name_a_wrong_setting(self) -> None:
        self.assertEqual([m for m in run_checks() if m.id.startswith("jobq.")], [])
        wrong = {
            "BACKEND": "jobq.contrib.django.tasks.JobqBackend",
            "QUEUES": ["default", ""],
            "OPTIONS": {"DATABASE": "elsewhere"},
        }
        with override_settings(TASKS={"default": wrong}):
            found = {m.id: m.msg for m in run_checks() if m.id.startswith("jobq.")}
        self.assertEqual(sorted(found), ["jobq.E002", "jobq.E003"])
        self.assertIn("'elsewhere', not in DATABASES", found["jobq.E002"])

    def test_jobqs_options_per_task(self) -> None:
        first, again, other = (receipt.enqueue(n).id for n in (7, 7, 8))
        self.assertEqual(again, first)  # one job per unique key while it waits
        self.assertNotEqual(other, first)
        record = queue_for().get(int(first))
        assert record is not None
        self.assertEqual(
            (record.retry.max_attempts, record.unique_key), (1, f"{receipt.module_path}:receipt-7")
        )
        assert record.deadline is not None
        self.assertEqual(record.deadline - record.created_at, timedelta(hours=1))
        # A task's options survive using(), and a result's task carries them.
        self.assertEqual(receipt.using(priority=5).retry, receipt.retry)
        self.assertEqual(receipt.get_result(first).task.unique_key, receipt.unique_key)

    def test_an_unknown_or_wrong_option_is_refused(self) -> None:
        with self.assertRaisesRegex(TypeError, r"^@task\(\): JobqBackend takes no option 'lease'"):
            task(lease=30)(plain)
        with self.assertRaisesRegex(InvalidTask, "retry must be a jobq.RetryPolicy"):
            task(retry={"max_attempts": 1})(plain)


class Claims(TransactionTestCase):
    def setUp(self) -> None:
        # TransactionTestCase flushes the models' tables only: jobq's are not models.
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM jobq_jobs")

    def test_a_higher_priority_runs_first(self) -> None:
        for priority in (0, 100, -100, 50):
            ordered.using(priority=priority).enqueue(priority)
        # process_jobs runs one attempt at a time: an async task on a loop of its own.
        ordered_async.using(priority=75).enqueue(75)
        self.assertEqual(queue_for().process_jobs(5), 5)
        self.assertEqual(queue_for().counts(), {"completed": 5})
        ran = Order.objects.filter(receipt="ordered").order_by("pk")
        self.assertEqual(list(ran.values_list("number", flat=True)), [100, 75, 50, 0, -100])

    def test_a_tasks_steps_run_once_across_a_durable_sleep(self) -> None:
        result = stepped.enqueue(7)
        job_id = int(result.id)
        self.assertEqual(queue_for().process_jobs(1), 1)  # the order, then the sleep
        self.assertEqual(queue_for().process_jobs(1), 0)  # asleep, holding no worker
        self.assertTrue(queue_for().wake(job_id))
        self.assertEqual(queue_for().process_jobs(1), 1)
        found = stepped.get_result(result.id)
        self.assertEqual(found.status, "SUCCESSFUL")
        (order,) = Order.objects.filter(number=7)
        self.assertEqual(found.return_value, {"order": order.pk, "key": f"jobq-{job_id}-order"})

    def test_a_row_naming_a_function_no_task_defines_imports_nothing(self) -> None:
        # The row as anyone with INSERT rights on jobq's table could write it.
        intruder = TaskJob("orders.intruder.run", [], {}, "default")
        job_id = queue_for().enqueue(intruder, type="tasks", retry=jobq.RetryPolicy(max_attempts=1))
        self.assertEqual(queue_for().process_jobs(1), 1)
        self.assertFalse("orders.intruder" in sys.modules, "the row's module was imported")
        record = queue_for().get(job_id)
        assert record is not None
        self.assertEqual(record.status, "failed")
        self.assertIn("unknown task 'orders.intruder.run'", record.last_error or "")

    def test_a_lock_wait_for_a_tasks_unique_key_ends_as_djangos_error(self) -> None:
        if connection.vendor == "sqlite":
            self.skipTest("no lock waits inside an IMMEDIATE SQLite transaction")
        held = key_held(f"{receipt.module_path}:receipt-9")  # each task's keys are its own
        with held, self.assertRaises(OperationalError), transaction.atomic():
            receipt.enqueue(9)
