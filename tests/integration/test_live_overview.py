"""The overview's charts and its live fragment: endings per type and in total over a chosen
window, on every database, and the fragment live.js swaps in."""

from __future__ import annotations

import re

import pytest
from werkzeug.test import Client

import jobq
from jobq.web import Credentials, make_app
from tests.support.jobs import Boom, Noop

NO_RETRY = jobq.RetryPolicy(max_attempts=1)


def test_endings_are_counted_per_type_in_spans_of_the_window(queue: jobq.Queue) -> None:
    queue.enqueue_many([Noop() for _ in range(3)])
    queue.enqueue_many([Boom("x") for _ in range(2)], retry=NO_RETRY)
    assert queue.process_jobs(5) == 5

    endings = queue.endings_by_type(60, 60)

    assert set(endings) == {"noop", "boom"}
    assert len(endings["noop"]["completed"]) == 60
    assert sum(endings["noop"]["completed"]) == 3
    assert sum(endings["noop"]["failed"]) == 0
    assert sum(endings["boom"]["failed"]) == 2
    assert sum(endings["noop"]["completed"][-2:]) == 3, "the latest spans"
    week = queue.endings_by_type(7 * 24 * 60, 84)
    assert sum(week["noop"]["completed"]) == 3
    with pytest.raises(ValueError, match="minutes must be"):
        queue.endings_by_type(8 * 24 * 60, 84)


@pytest.mark.databases("sqlite")
def test_the_overview_charts_each_type_and_serves_its_live_fragment(queue: jobq.Queue) -> None:
    queue.enqueue_many([Noop() for _ in range(2)])
    queue.enqueue(Boom("<script>alert(1)</script>"), retry=NO_RETRY, type="<b>odd</b>")
    assert queue.process_jobs(3) == 3
    client = Client(make_app(queue, credentials=Credentials()))

    page = client.get("/?window=15m")
    html = page.get_data(as_text=True)
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert "<strong>all types</strong>: 2 completed, 1 failed" in html
    assert "<strong>noop</strong>: 2 completed, 0 failed" in html
    assert "<strong>&lt;b&gt;odd&lt;/b&gt;</strong>: 0 completed, 1 failed" in html
    assert len(re.findall(r'<figure class="chart"', html)) == 3
    assert 'data-src="/live?window=15m"' in html
    assert '<script src="/live.js"></script>' in html
    assert "<b>odd</b>" not in html

    fragment = client.get("/live?window=7d")
    assert fragment.status_code == 200
    text = fragment.get_data(as_text=True)
    assert "<html" not in text
    assert "Endings, 7d window" in text
    script = client.get("/live.js")
    assert script.mimetype == "text/javascript"
    assert "innerHTML" in script.get_data(as_text=True)
    assert client.get("/?window=2y").status_code == 400
