"""Run by Django's own test runner (`manage.py test orders`), from tests/system/test_django.py: the
test database gets jobq's tables from the migrations, and enqueue follows Django's
transactions."""

from __future__ import annotations

from django.db import OperationalError, connection, transaction
from django.test import TestCase, TransactionTestCase

import jobq
from jobq.contrib.django import dsn, emit, enqueue, queue_for
from orders.jobs import MakeReceipt
from orders.locks import key_held
from orders.models import Order


class TheTestDatabase(TestCase):
    def test_has_jobqs_tables_from_the_migrations(self) -> None:
        self.assertEqual(queue_for().counts(), {})

    def test_refuses_process_jobs_inside_testcases_transaction(self) -> None:
        # TestCase wraps each test in a transaction; workers need autocommit.
        with self.assertRaisesRegex(RuntimeError, "autocommit"):
            queue_for().process_jobs(1)


class EnqueueInTransactions(TransactionTestCase):
    def setUp(self) -> None:
        # TransactionTestCase flushes the models' tables only: jobq's are not models.
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM jobq_jobs")
            cursor.execute("DELETE FROM jobq_events")

    def order(self) -> MakeReceipt:
        return MakeReceipt(Order.objects.create(number=1).pk)

    def test_a_commit_keeps_the_job(self) -> None:
        with transaction.atomic():
            job_id = enqueue(self.order())
        self.assertIsNotNone(job_id)
        self.assertEqual(queue_for().counts(), {"pending": 1})

    def test_a_rollback_drops_the_job(self) -> None:
        with self.assertRaises(ZeroDivisionError), transaction.atomic():
            enqueue(self.order())
            1 / 0  # noqa: B018
        self.assertEqual(queue_for().counts(), {})

    def test_a_savepoint_rollback_drops_only_its_job(self) -> None:
        with transaction.atomic():
            enqueue(self.order())
            with self.assertRaises(ZeroDivisionError), transaction.atomic():
                enqueue(self.order())
                1 / 0  # noqa: B018
        self.assertEqual(queue_for().counts(), {"pending": 1})

    def test_on_commit_waits_for_the_commit(self) -> None:
        with transaction.atomic():
            self.assertIsNone(enqueue(self.order(), on_commit=True))
            self.assertEqual(queue_for().counts(), {})
        self.assertEqual(queue_for().counts(), {"pending": 1})
        with self.assertRaises(ZeroDivisionError), transaction.atomic():
            enqueue(self.order(), on_commit=True)
            1 / 0  # noqa: B018
        self.assertEqual(queue_for().counts(), {"pending": 1})

    def test_an_emit_commits_and_rolls_back_with_the_transaction(self) -> None:
        with self.assertRaises(ZeroDivisionError), transaction.atomic():
            self.assertFalse(emit("order-1:shipped", {"carrier": "post"}))
            1 / 0  # noqa: B018
        self.assertEqual(queue_for().backend.event_state("order-1:shipped"), (False, None))
        with transaction.atomic():
            emit("order-1:shipped", {"carrier": "other"})
        state = queue_for().backend.event_state("order-1:shipped")
        self.assertEqual(state, (True, '{"carrier":"other"}'))

    def test_an_emit_on_commit_waits_for_the_commit(self) -> None:
        with transaction.atomic():
            self.assertIsNone(emit("order-2:shipped", 1, on_commit=True))
            self.assertEqual(queue_for().backend.event_state("order-2:shipped"), (False, None))
        self.assertEqual(queue_for().backend.event_state("order-2:shipped"), (True, "1"))

    def test_djangos_connection_is_taken_disconnected_or_not(self) -> None:
        connection.close()  # as after every request: the wrapper holds no connection now
        with jobq.Queue.connect(dsn()) as own:
            with transaction.atomic():
                own.enqueue(self.order(), connection=connection)
                self.assertEqual(own.counts(), {}, "written outside the transaction")
            self.assertEqual(own.counts(), {"pending": 1})
            connection.close()
            self.assertEqual(jobq.Queue.from_connection(connection).counts(), {"pending": 1})
            with self.assertRaisesRegex(TypeError, "connection=None"):
                own.enqueue(self.order(), connection=None)

    def test_process_jobs_runs_orm_jobs_in_autocommit(self) -> None:
        job = self.order()
        enqueue(job)
        self.assertEqual(queue_for().process_jobs(5), 1)
        receipt = Order.objects.get(pk=job.order_id).receipt
        self.assertTrue(receipt.startswith(f"receipt for order {job.order_id} "), receipt)

    def test_a_lock_timeout_inside_atomic_reaches_the_application(self) -> None:
        if connection.vendor == "sqlite":
            # The project's IMMEDIATE transactions take the write lock at Django's BEGIN:
            # nothing jobq writes inside atomic() can wait for a lock.
            self.skipTest("no lock waits inside an IMMEDIATE SQLite transaction")
        # Another producer's uncommitted job holds the key the application asks for.
        with key_held("receipt"), transaction.atomic():
            kept = Order.objects.create(number=2)
            with self.assertRaises(OperationalError), transaction.atomic():
                enqueue(self.order(), unique_key="receipt")
            # The savepoint rolled back the enqueue only: the order stays.
            kept.number = 3
            kept.save()
        self.assertEqual(Order.objects.get(pk=kept.pk).number, 3)
        self.assertEqual(queue_for().counts(), {})
