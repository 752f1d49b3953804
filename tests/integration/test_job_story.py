"""A job's whole story on its status page: its result, progress and checkpoint, and each
attempt as `jobq show` lists it, with the last error labelled by the attempt it came from.
The database layer is test_results.py's: one database will do."""

from __future__ import annotations

import re

import pytest
from werkzeug.test import Client

import jobq
from jobq.web import Credentials, make_app
from tests.support.jobs import Boom
from tests.support.result_jobs import Resume

pytestmark = pytest.mark.databases("sqlite")

SCRIPT = "<script>alert('owned')</script>"


def job_page(queue: jobq.Queue, job_id: int) -> str:
    response = Client(make_app(queue, credentials=Credentials())).get(f"/jobs/{job_id}")
    assert response.status_code == 200
    return response.get_data(as_text=True)


def test_a_job_completed_after_a_failure_says_an_earlier_attempt_failed(
    queue: jobq.Queue,
) -> None:
    job_id = queue.enqueue(Resume(rows=4, fail_at=2), retry=jobq.RetryPolicy(backoff=0))
    assert queue.process_jobs(2) == 2

    html = job_page(queue, job_id)

    assert '<h2 id="error-heading">An earlier attempt failed: attempt 1</h2>' in html
    assert "Last error" not in html
    rows = re.findall(r'<tr id="attempt-(\d+)">(.*?)</tr>', html, re.S)
    assert [number for number, _ in rows] == ["1", "2"]
    assert "builtins.RuntimeError" in rows[0][1]
    assert "RuntimeError: stopped at row 2" in rows[0][1], "the error's gist"
    assert ">completed</span>" in rows[1][1]
    record = queue.get(job_id)
    assert record is not None
    for entry, (_, row) in zip(record.history, rows, strict=True):
        assert entry.worker is not None
        assert entry.worker in row
    assert '<pre id="result">' in html


def test_a_failed_job_labels_its_last_error_with_its_attempt_and_escapes_it(
    queue: jobq.Queue,
) -> None:
    job_id = queue.enqueue(Boom(SCRIPT), retry=jobq.RetryPolicy(max_attempts=2, backoff=0))
    assert queue.process_jobs(2, type=Boom.type) == 2

    html = job_page(queue, job_id)

    assert '<h2 id="error-heading">Last error, of attempt 2</h2>' in html
    assert re.findall(r'<tr id="attempt-(\d+)">', html) == ["1", "2"]
    assert "<script>" not in html
    assert "&lt;script&gt;alert(&#39;owned&#39;)&lt;/script&gt;" in html


def test_a_job_no_attempt_has_ended_shows_no_error_and_an_empty_history(
    queue: jobq.Queue,
) -> None:
    job_id = queue.enqueue(Boom("never run"))

    html = job_page(queue, job_id)

    assert "error-heading" not in html
    assert "No attempt has ended yet." in html
