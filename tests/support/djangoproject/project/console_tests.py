"""jobq's console mounted in Django behind the admin's staff login, run by Django's test runner
from tests/system/test_django_console.py."""

from __future__ import annotations

import re

from asgiref.sync import async_to_sync
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import AsyncClient, Client, TransactionTestCase
from orders.jobs import MakeReceipt

from jobq.contrib.django import enqueue, queue_for


class TheConsole(TransactionTestCase):
    def setUp(self) -> None:
        # TransactionTestCase flushes the models' tables only: jobq's are not models.
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM jobq_jobs")
        self.job_id = enqueue(MakeReceipt(1))
        self.client = Client(enforce_csrf_checks=True)

    def sign_in(self, *, staff: bool = True, operator: bool = False) -> User:
        user = User.objects.create_user("ana", password="pw", is_staff=staff)
        if operator:
            user.groups.add(Group.objects.create(name="jobq operators"))
        self.client.force_login(user)
        return user

    def test_anonymous_visitors_are_sent_to_the_admin_login(self) -> None:
        response = self.client.get("/jobq/jobs")
        self.assertEqual(response.status_code, 302)
        self.assertEqual(response["Location"], "/admin/login/?next=/jobq/jobs")

    def test_signed_in_users_who_are_not_staff_are_refused(self) -> None:
        self.sign_in(staff=False)
        self.assertEqual(self.client.get("/jobq/").status_code, 403)

    def test_staff_see_every_page_with_links_under_the_mount(self) -> None:
        self.sign_in()
        for path in ("/jobq/", "/jobq/jobs", f"/jobq/jobs/{self.job_id}", "/jobq/schedules"):
            response = self.client.get(path)
            self.assertEqual(response.status_code, 200, path)
            self.assertIn("script-src 'self'", response["Content-Security-Policy"])
            html = response.content.decode()
            links = re.findall(r'(?:href|action)="([^"]+)"', html)
            self.assertTrue(links, path)
            self.assertEqual([link for link in links if not link.startswith("/jobq/")], [])
        self.assertIn(
            f'href="/jobq/jobs/{self.job_id}"', self.client.get("/jobq/jobs").content.decode()
        )

    def test_staff_outside_the_operators_group_see_it_read_only(self) -> None:
        self.sign_in()
        html = self.client.get(f"/jobq/jobs/{self.job_id}").content.decode()
        self.assertIn("read-only", html)
        self.assertNotIn('id="cancel"', html)
        token = self.client.cookies["csrftoken"].value
        refused = self.client.post(
            f"/jobq/jobs/{self.job_id}/cancel", {"csrfmiddlewaretoken": token}
        )
        self.assertEqual(refused.status_code, 405)
        self.assertEqual(queue_for().get(self.job_id).status, "pending")

    def test_an_operator_acts_with_djangos_csrf_token(self) -> None:
        self.sign_in(operator=True)
        html = self.client.get(f"/jobq/jobs/{self.job_id}").content.decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
        self.assertIsNotNone(token, html)
        assert token is not None
        done = self.client.post(
            f"/jobq/jobs/{self.job_id}/cancel", {"csrfmiddlewaretoken": token.group(1)}
        )
        self.assertEqual(done.status_code, 303)
        self.assertEqual(done["Location"], f"/jobq/jobs/{self.job_id}")
        self.assertEqual(queue_for().get(self.job_id).status, "cancelled")
        said = self.client.get(done["Location"]).content.decode()
        self.assertIn("was cancelled", said)

    def test_a_post_without_djangos_token_is_refused(self) -> None:
        self.sign_in(operator=True)
        self.client.get(f"/jobq/jobs/{self.job_id}")
        for form in ({}, {"csrfmiddlewaretoken": "forged" * 6}):
            refused = self.client.post(f"/jobq/jobs/{self.job_id}/cancel", form)
            self.assertEqual(refused.status_code, 403)
        self.assertEqual(queue_for().get(self.job_id).status, "pending")

    def test_djangos_asgi_handler_serves_it_too(self) -> None:
        user = self.sign_in(operator=True)
        client = AsyncClient()
        client.force_login(user)
        response = async_to_sync(client.get)(f"/jobq/jobs/{self.job_id}")
        self.assertEqual(response.status_code, 200)
        html = response.content.decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
        assert token is not None, html
        done = async_to_sync(client.post)(
            f"/jobq/jobs/{self.job_id}/cancel", {"csrfmiddlewaretoken": token.group(1)}
        )
        self.assertEqual(done.status_code, 303)
        self.assertEqual(done["Location"], f"/jobq/jobs/{self.job_id}")
        self.assertEqual(queue_for().get(self.job_id).status, "cancelled")
