"""What a TaskResult of JobqBackend reads, as Django's own backends give it (issue 54): the
ids it takes, the run_after and enqueue time the caller gave, each task's own unique keys,
queue names jobq cannot serve, every failed attempt in `errors`, and task_finished sent
once the attempt's outcome is recorded. Run by tests/system/test_django_tasks.py."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.test import TestCase, TransactionTestCase, override_settings
from django.utils import timezone

try:
    from django.tasks.signals import task_finished, task_started
except ImportError:
    from django_tasks.signals import task_finished, task_started

import jobq
from jobq.backends.rows import ACK_PRECISION
from jobq.contrib.django import dsn, queue_for
from jobq.contrib.django.task_api import InvalidTask, TaskResultDoesNotExist
from jobq.job import registered_types
from orders.tasks import add, fails, invoice, pause, receipt

ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
# Longer than jobq's ACK_PRECISION: a batch of such tasks keeps each one's own times.
PAUSE = ACK_PRECISION + 0.01


class Results(TestCase):
    def test_get_result_takes_exactly_the_ids_jobq_issues(self) -> None:
        result_id = add.enqueue(1, b=2).id
        for bad in (
            f" {result_id} ",
            result_id.translate(ARABIC_INDIC),
            f"0{result_id}",
            f"+{result_id}",
            f"{result_id}.0",
            "0",
            "-1",
            "",
            str(2**63),
            "9" * 40,
        ):
            with self.subTest(bad=bad), self.assertRaises(TaskResultDoesNotExist):
                add.get_result(bad)
        # Nothing reached the database: the test's transaction still works.
        self.assertEqual(add.get_result(result_id).id, result_id)

    def test_a_queue_name_jobq_cannot_serve_is_an_invalid_task(self) -> None:
        every_queue = {
            "BACKEND": "jobq.contrib.django.tasks.JobqBackend",
            "QUEUES": [],  # Django's "any queue"
        }
        with override_settings(TASKS={"default": every_queue}):
            with self.assertRaisesRegex(InvalidTask, "^queue_name is no jobq job type: "):
                add.using(queue_name="q" * 256).enqueue(1, b=2)
            self.assertEqual(add.using(queue_name="q" * 255).enqueue(1, b=2).status, "READY")

    @override_settings(USE_TZ=False, TIME_ZONE="Asia/Kolkata")
    def test_a_naive_run_after_is_taken_in_the_projects_time_zone(self) -> None:
        later = datetime.now() + timedelta(hours=2)  # naive, as USE_TZ = False has times
        result = add.using(run_after=later).enqueue(1, b=2)
        self.assertEqual(add.get_result(result.id).task.run_after, later)
        record = queue_for().get(int(result.id))
        assert record is not None
        # Two hours after the enqueue, not two hours and a half either way.
        self.assertLess(
            abs(record.scheduled_at - record.created_at - timedelta(hours=2)),
            timedelta(minutes=10),
        )

    def test_a_past_run_after_is_kept_as_given(self) -> None:
        earlier = timezone.now() - timedelta(hours=1)
        result = add.using(run_after=earlier).enqueue(1, b=2)
        self.assertEqual(result.task.run_after, earlier)
        self.assertEqual(add.get_result(result.id).task.run_after, earlier)

    def test_enqueued_at_is_the_time_of_the_call(self) -> None:
        # The test's transaction began before this test did (TestCase's, in setUpClass).
        before = timezone.now()
        result = add.enqueue(1, b=2)
        self.assertGreaterEqual(result.enqueued_at, before)
        self.assertLessEqual(result.enqueued_at, timezone.now())

    def test_a_unique_key_is_each_tasks_own(self) -> None:
        first, again = receipt.enqueue(7), receipt.enqueue(7)
        self.assertEqual(again.id, first.id)
        other = invoice.enqueue(7)
        self.assertNotEqual(other.id, first.id)
        self.assertEqual(other.task.func, invoice.func)
        self.assertEqual(invoice.get_result(other.id).id, other.id)
        record = queue_for().get(int(other.id))
        assert record is not None
        self.assertEqual(record.unique_key, f"{invoice.module_path}:receipt-7")

    def test_the_queues_the_backend_declares_are_known_job_types(self) -> None:
        self.assertLessEqual({"default", "tasks"}, registered_types())


class Received:
    """What each task signal carried, as (signal, status, finished, error classes)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, bool, list[str]]] = []

    def receiver(self, name: str) -> Any:
        def receive(sender: Any, task_result: Any, **kwargs: Any) -> None:
            errors = [e.exception_class_path for e in task_result.errors]
            finished = task_result.finished_at is not None
            self.seen.append((name, str(task_result.status), finished, errors))

        return receive


class Runs(TransactionTestCase):
    def setUp(self) -> None:
        # TransactionTestCase flushes the models' tables only: jobq's are not models.
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM jobq_jobs")
        self.received = Received()
        for name, signal in (("started", task_started), ("finished", task_finished)):
            receiver = self.received.receiver(name)
            signal.connect(receiver, weak=False)
            self.addCleanup(signal.disconnect, receiver)

    def test_task_finished_carries_the_outcome_recorded_once_per_attempt(self) -> None:
        succeeds = add.enqueue(2, b=3)
        self.assertEqual(queue_for().process_jobs(1), 1)
        failing = fails.enqueue("bad input")  # RETRY allows 2 attempts, no backoff
        self.assertEqual(queue_for().process_jobs(2), 2)
        self.assertEqual(
            self.received.seen,
            [
                ("started", "RUNNING", False, []),
                ("finished", "SUCCESSFUL", True, []),
                ("started", "RUNNING", False, []),
                ("finished", "READY", False, ["builtins.ValueError"]),
                ("started", "RUNNING", False, ["builtins.ValueError"]),
                ("finished", "FAILED", True, ["builtins.ValueError"] * 2),
            ],
        )
        self.assertEqual(add.get_result(succeeds.id).status, "SUCCESSFUL")
        # The retry moved the job's schedule; the task's run_after is what was asked.
        result = fails.get_result(failing.id)
        self.assertIsNone(result.task.run_after)
        failing.refresh()
        self.assertEqual((failing.status, failing.task.run_after), ("FAILED", None))

    def test_a_task_claimed_behind_another_reads_ready_until_it_runs(self) -> None:
        # A prefetching worker claims both and runs them one after the other (issue 54,
        # item 11): the second must not read RUNNING before it runs, and each keeps its
        # own start and end.
        first, second = pause.enqueue(PAUSE), pause.enqueue(PAUSE)
        with jobq.Queue.connect(dsn()) as worker:
            running, queued = worker.claim_many(2, queued=True)
            self.assertEqual([str(running.id), str(queued.id)], [first.id, second.id])
            self.assertEqual(pause.get_result(first.id).status, "RUNNING")
            waiting = pause.get_result(second.id)
            self.assertEqual(
                (waiting.status, waiting.started_at, waiting.last_attempted_at),
                ("READY", None, None),
            )
            self.assertEqual(waiting.worker_ids, [])
            ran = [worker.run_unacknowledged(claim) for claim in (running, queued)]
            worker.complete_many_and_claim([c for c in ran if isinstance(c, jobq.ClaimedJob)], 0)
        # task_started, and the TaskContext, see each attempt run as it starts.
        self.assertEqual(
            [status for name, status, _, _ in self.received.seen if name == "started"],
            ["RUNNING", "RUNNING"],
        )
        one, two = pause.get_result(first.id), pause.get_result(second.id)
        self.assertEqual((one.status, two.status), ("SUCCESSFUL", "SUCCESSFUL"))
        assert one.finished_at is not None
        assert two.started_at is not None
        assert two.finished_at is not None
        # SQLite's clock counts milliseconds, and two statements read it.
        self.assertLessEqual(one.finished_at, two.started_at + timedelta(milliseconds=1))
        self.assertLess(two.started_at, two.finished_at)
        self.assertEqual(two.last_attempted_at, two.started_at)

    def test_an_attempt_that_raised_nothing_is_in_errors_named_by_jobq(self) -> None:
        result = fails.enqueue("never raised")
        with jobq.Queue.connect(dsn(), lease_duration=0.001) as worker:
            claim = worker.claim()
            assert claim is not None
            # The lease ends a millisecond after the claim, by the database's clock, which no
            # event tells: maintenance is asked again until it recovers the attempt.
            deadline = time.monotonic() + 30
            while not worker.run_maintenance()["requeued"]:
                self.assertLess(time.monotonic(), deadline, "the lease never ended")
                time.sleep(0.01)
            assert worker.cancel(int(result.id))
        result.refresh()
        self.assertEqual(result.status, "FAILED")
        self.assertEqual(
            [(e.exception_class_path, e.traceback.split(":")[0]) for e in result.errors],
            [("jobq.errors.LeaseExpired", "Lease expired")],
        )
        self.assertTrue(issubclass(result.errors[0].exception_class, Exception))
