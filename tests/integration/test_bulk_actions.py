"""Actions on many jobs from the status page: the ticked ones, or every match of a filter,
on every database; each a POST with the CSRF token, refused in read-only mode."""

from __future__ import annotations

import logging
import re

import pytest
from werkzeug.test import Client, TestResponse

import jobq
from jobq.web import Credentials, make_app
from jobq.web import bulk as web_bulk
from tests.support.jobs import Boom, Noop

NO_RETRY = jobq.RetryPolicy(max_attempts=1)


def token(client: Client, path: str = "/jobs?status=failed") -> str:
    html = client.get(path).get_data(as_text=True)
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, html
    return match.group(1)


def act(client: Client, **fields: str | list[str]) -> TestResponse:
    response = client.post("/jobs/act", data={"csrf": token(client), **fields})
    assert response.status_code == 303, response.get_data(as_text=True)
    return client.get(response.headers["Location"])


def notice(page: TestResponse) -> str:
    match = re.search(r'<p class="notice" role="status">(.*?)</p>', page.get_data(as_text=True))
    assert match, page.get_data(as_text=True)
    return match.group(1)


def failed(queue: jobq.Queue, messages: list[str]) -> list[int]:
    ids = queue.enqueue_many([Boom(message) for message in messages], retry=NO_RETRY)
    assert queue.process_jobs(len(ids), type=Boom.type) == len(ids)
    return ids


def test_retry_all_that_match_retries_every_match_and_nothing_else(
    queue: jobq.Queue, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(web_bulk, "BATCH", 7)  # several batches of matches
    bad_deploy = failed(queue, [f"KeyError: 'region' ({n})" for n in range(30)])
    others = failed(queue, ["timeout"] * 5)
    client = Client(make_app(queue, credentials=Credentials(user="ana", password="pw")))
    auth = {"Authorization": "Basic YW5hOnB3"}  # ana:pw
    html = client.get("/jobs?status=failed&error=region", headers=auth).get_data(as_text=True)
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert csrf
    assert 'id="all-retry"' in html

    with caplog.at_level(logging.INFO, logger="jobq.web"):
        response = client.post(
            "/jobs/act",
            data={
                "csrf": csrf.group(1),
                "scope": "all",
                "action": "retry",
                "status": "failed",
                "error": "region",
            },
            headers=auth,
        )
    assert response.status_code == 303
    assert response.headers["Location"] == "/jobs?status=failed&error=region"
    page = client.get(response.headers["Location"], headers=auth)
    assert notice(page) == "Retried 30 jobs."
    assert {queue.get(job_id).status for job_id in bad_deploy} == {jobq.Status.PENDING}  # type: ignore[union-attr]
    assert {queue.get(job_id).status for job_id in others} == {jobq.Status.FAILED}  # type: ignore[union-attr]
    assert "operator 'ana': Retried 30 jobs." in caplog.text


def test_ticked_jobs_are_acted_on_and_the_skipped_ones_said_why(queue: jobq.Queue) -> None:
    holder_key = "nightly"
    first = queue.enqueue(Boom("x"), retry=NO_RETRY, unique_key=holder_key)
    assert queue.process_jobs(1, type=Boom.type) == 1
    holder = queue.enqueue(Noop(), unique_key=holder_key)
    plain = failed(queue, ["y"])[0]
    client = Client(make_app(queue, credentials=Credentials()))

    page = act(client, action="retry", id=[str(first), str(plain)], status="failed")

    assert notice(page) == (
        f"Retried 1 job; 1 skipped: job {holder} holds its unique key &#39;nightly&#39;; "
        "retry it once that job has ended."
    )
    assert queue.get(plain).status is jobq.Status.PENDING  # type: ignore[union-attr]

    page = act(client, action="cancel", id=[str(plain), str(first)])
    assert notice(page) == f"Cancelled 1 job; 1 skipped: job {first} is failed."

    done = queue.enqueue(Noop(), type="tidy")
    assert queue.process_jobs(1, type="tidy") == 1
    page = act(client, action="delete", id=[str(done), str(holder)])
    assert notice(page) == f"Deleted 1 job; 1 skipped: job {holder} is pending, not ended."
    assert queue.get(done) is None


@pytest.mark.databases("sqlite")
def test_bulk_actions_need_the_csrf_token_a_filter_for_all_and_a_writable_page(
    queue: jobq.Queue,
) -> None:
    job_id = failed(queue, ["z"])[0]
    client = Client(make_app(queue, credentials=Credentials()))
    token(client)
    forged = client.post("/jobs/act", data={"action": "retry", "id": str(job_id)})
    assert forged.status_code == 403
    unfiltered = client.post(
        "/jobs/act", data={"csrf": token(client), "action": "delete", "scope": "all"}
    )
    assert unfiltered.status_code == 400
    assert "needs a filter" in unfiltered.get_data(as_text=True)

    read_only = Client(make_app(queue, read_only=True, credentials=Credentials()))
    html = read_only.get("/jobs?status=failed").get_data(as_text=True)
    assert "act-all" not in html
    assert 'type="checkbox"' not in html
    for action in ("retry", "cancel", "delete"):
        refused = read_only.post(
            "/jobs/act", data={"action": action, "scope": "all", "status": "failed"}
        )
        assert refused.status_code == 405
    assert queue.get(job_id).status is jobq.Status.FAILED  # type: ignore[union-attr]
