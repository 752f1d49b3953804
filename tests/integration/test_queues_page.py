"""The status page's Queues page: per type, its pause, its limits and their overrides, the
schedules that enqueue it and its error rate over the last hour; every action a POST with
the page's token, refused on a read-only page."""

from __future__ import annotations

import re

import pytest
from werkzeug.test import Client

import jobq
import jobq.queue
import jobq.schedules
from jobq.schedules import periodic
from jobq.web import Credentials, make_app
from tests.integration.test_status_page import failed_job, page, post, text
from tests.support.jobs import Limited, Noop, Rated


@pytest.fixture
def client(queue: jobq.Queue) -> Client:
    return Client(make_app(queue, credentials=Credentials()))


def row_of(html: str, job_type: str) -> str:
    found = re.search(rf'<tr id="type-\d+" data-type="{job_type}">(.*?)</tr>', html, re.S)
    assert found, f"no row for {job_type}"
    return found.group(1)


def test_each_type_shows_its_error_rate_over_the_last_hour(
    queue: jobq.Queue, client: Client
) -> None:
    failed_job(queue)
    queue.enqueue_many([Noop(), Noop(), Noop()])
    assert queue.process_jobs(3, type="noop") == 3
    html = page(client, "/queues")
    assert '<td class="n error-rate">100.0 %</td>' in row_of(html, "boom")
    assert '<td class="n error-rate">0.0 %</td>' in row_of(html, "noop")


def test_pause_resume_and_overrides_from_the_queues_page_come_back_to_it(
    queue: jobq.Queue, client: Client
) -> None:
    queue.enqueue(Limited("a", 1))
    queue.enqueue(Rated("v"))

    paused = text(post(client, "/pause", "/queues", type="limited", back="queues"))
    assert "<h1>Queues</h1>" in paused
    assert "Jobs of type limited are paused" in paused
    assert '<span class="paused">paused</span>' in row_of(paused, "limited")
    resumed = text(post(client, "/resume", "/queues", type="limited", back="queues"))
    assert queue.paused() == set()
    assert "paused</span>" not in row_of(resumed, "limited")

    limited = text(
        post(client, "/limit", "/queues", type="limited", concurrency="7", back="queues")
    )
    assert "The concurrency limit of type limited is changed on every node." in limited
    assert "7 (override; declared 2)" in row_of(limited, "limited")
    rated = text(post(client, "/rate", "/queues", type="rated", rate="5/60", back="queues"))
    assert "5/60 s (override)" in row_of(rated, "rated")


def test_the_schedules_that_enqueue_a_type_show_on_its_row(
    queue: jobq.Queue, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    declared = jobq.schedules.Schedules()
    monkeypatch.setattr(jobq.schedules, "REGISTERED", declared)
    monkeypatch.setattr(jobq.queue, "REGISTERED", declared)
    declared.add(
        periodic("nightly-noop", Noop(), "0 3 * * *", "UTC", None, None, None, 0, False, True)
    )
    html = page(client, "/queues")
    assert "nightly-noop <code>cron 0 3 * * * UTC</code>" in row_of(html, "noop")


def test_a_read_only_queues_page_has_no_forms_and_refuses_actions(queue: jobq.Queue) -> None:
    queue.enqueue(Limited("a", 1))
    client = Client(make_app(queue, read_only=True, credentials=Credentials()))
    assert "<form" not in page(client, "/queues")
    refused = client.post("/pause", data={"type": "limited", "back": "queues", "csrf": "x"})
    assert refused.status_code == 405
    assert queue.paused() == set()


def test_a_queues_form_without_the_page_s_token_is_refused(
    queue: jobq.Queue, client: Client
) -> None:
    queue.enqueue(Limited("a", 1))
    page(client, "/queues")  # the cookie, not the token
    refused = client.post("/limit", data={"type": "limited", "concurrency": "9", "back": "queues"})
    assert refused.status_code == 403
    assert queue.limits()[0].override is None


def test_markup_in_a_type_name_shows_as_text(queue: jobq.Queue, client: Client) -> None:
    queue.pause("<script>x</script>")
    html = page(client, "/queues")
    assert "<script>x</script>" not in html
    assert "&lt;script&gt;x&lt;/script&gt;" in html
