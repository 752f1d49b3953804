"""What a real `jobq web` takes from a request it did not ask for.

After a DNS rebinding, a page on another site whose name now points at loopback sends its
requests with its own name in the Host header (and, posting, in the Origin): none may read a
job or act on one, while the names the page is served on still may. And a link anyone can
write cannot make the page say, in its own words, that an action was taken."""

from __future__ import annotations

import http.client
import re
from collections.abc import Iterator
from dataclasses import dataclass
from http.cookies import SimpleCookie
from urllib.parse import urlencode

import pytest

import jobq
from tests.support.jobs import Boom
from tests.support.paths import REPO
from tests.support.web import jobq_web

TIMEOUT = 15.0
SECRET = "card 4111-1111-1111-1111"
ATTACKER = "attacker.example"


@dataclass
class Answer:
    status: int
    body: str
    cookie: str | None


def request(
    address: str, method: str, path: str, host: str, body: str = "", **headers: str
) -> Answer:
    """One request to the server at `address`, naming `host` in its Host header."""
    port = int(address.removeprefix("http://").rstrip("/").rpartition(":")[2])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        sent = {"Host": f"{host}:{port}", **headers}
        if body:
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        connection.request(method, path, body=body or None, headers=sent)
        response = connection.getresponse()
        cookie = SimpleCookie(response.getheader("Set-Cookie") or "").get("jobq_csrf")
        value = None if cookie is None else cookie.value
        return Answer(response.status, response.read().decode(), value)
    finally:
        connection.close()


@pytest.fixture
def failed(queue: jobq.Queue) -> int:
    job_id = queue.enqueue(Boom(SECRET), retry=jobq.RetryPolicy(max_attempts=1))
    assert queue.process_jobs(1, type=Boom.type) == 1
    return job_id


@pytest.fixture
def address(dsn: str, queue: jobq.Queue) -> Iterator[str]:
    with jobq_web(dsn, cwd=REPO) as served:
        yield served


@pytest.mark.databases("sqlite")
def test_a_rebound_name_can_neither_read_a_job_nor_retry_it(
    queue: jobq.Queue, failed: int, address: str
) -> None:
    for path in ("/", "/jobs", f"/jobs/{failed}"):
        answer = request(address, "GET", path, ATTACKER)
        assert answer.status == 400, answer
        assert SECRET not in answer.body
        assert "--allowed-host" in answer.body
    # The form's token, as a page on the page's own host would read it.
    page = request(address, "GET", f"/jobs/{failed}", "127.0.0.1")
    assert page.status == 200
    assert SECRET in page.body
    token = re.search(r'name="csrf" value="([0-9a-f]+)"', page.body)
    assert token is not None
    assert page.cookie is not None
    posted = request(
        address,
        "POST",
        f"/jobs/{failed}/retry",
        ATTACKER,
        urlencode({"csrf": token.group(1)}),
        Origin=f"http://{ATTACKER}:{address.rstrip('/').rpartition(':')[2]}",
        Cookie=f"jobq_csrf={page.cookie}",
    )
    assert posted.status == 400, posted
    record = queue.get(failed)
    assert record is not None
    assert record.status == "failed"


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST.", "[::1]"])
def test_the_loopback_names_and_the_bound_address_are_served(
    failed: int, address: str, host: str
) -> None:
    answer = request(address, "GET", f"/jobs/{failed}", host)
    assert answer.status == 200, answer
    assert SECRET in answer.body


@pytest.mark.databases("sqlite")
def test_a_listed_name_is_served_and_only_it(dsn: str, queue: jobq.Queue, failed: int) -> None:
    hosts = ("--allowed-host", "jobs.example", "--allowed-host", "Ops.Example")
    with jobq_web(dsn, *hosts, cwd=REPO) as served:
        for host in ("jobs.example", "ops.example"):
            assert request(served, "GET", f"/jobs/{failed}", host).status == 200
        assert request(served, "GET", f"/jobs/{failed}", ATTACKER).status == 400
        assert request(served, "GET", f"/jobs/{failed}", "sub.jobs.example").status == 400


@pytest.mark.databases("sqlite")
def test_no_address_puts_words_in_the_page_s_notice(failed: int, address: str) -> None:
    words = "Call 0800 555 0100 to keep your account"
    for path in (
        f"/?done=limit-set&type={words}",
        f"/?done=not-paused&type={words}",
        f"/jobs/{failed}?done=retried",
        f"/jobs/{failed}?done=cancelled",
    ):
        answer = request(address, "GET", path.replace(" ", "+"), "127.0.0.1")
        assert answer.status == 200, answer
        assert 'class="notice"' not in answer.body, path
        assert "0800" not in answer.body, path
