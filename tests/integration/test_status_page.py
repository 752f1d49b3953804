"""The status page over HTTP: every page and action, on every database."""

from __future__ import annotations

import asyncio
import base64
import logging
import re
from collections.abc import Callable, Iterator

import psycopg
import pytest
from asgiref.testing import ApplicationCommunicator
from asgiref.wsgi import WsgiToAsgi
from werkzeug.test import Client, TestResponse

import jobq
import jobq.queue
import jobq.schedules
from jobq.cli import commands as cli
from jobq.schedules import periodic
from jobq.web import Credentials, make_app
from jobq.web import views as web_views
from tests.support import drivers
from tests.support.jobs import Boom, Limited, Noop, Rated, Record

NO_RETRY = jobq.RetryPolicy(max_attempts=1)
SCRIPT = "<script>alert('owned')</script>"
ASGI_TIMEOUT = 10.0


@pytest.fixture
def client(queue: jobq.Queue) -> Client:
    return Client(make_app(queue, credentials=Credentials()))


def text(response: TestResponse) -> str:
    return response.get_data(as_text=True)


def page(client: Client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, text(response)
    assert response.mimetype == "text/html"
    return text(response)


def csrf_token(client: Client, path: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', page(client, path))
    assert match, f"no form on {path}"
    return match.group(1)


def post(client: Client, path: str, form_page: str, **fields: str) -> TestResponse:
    """Press a button: read the form's token from its page, post, follow the redirect."""
    fields["csrf"] = csrf_token(client, form_page)
    response = client.post(path, data=fields)
    assert response.status_code == 303, text(response)
    return client.get(response.headers["Location"])


def bad_request(client: Client, path: str, **fields: str) -> str:
    """Post the overview's form with a bad value: refused, and the page that says why."""
    refused = client.post(path, data={**fields, "csrf": csrf_token(client, "/")})
    assert refused.status_code == 400
    return text(refused)


def failed_job(queue: jobq.Queue, message: str = "boom") -> int:
    job_id = queue.enqueue(Boom(message), retry=NO_RETRY)
    assert queue.process_jobs(1, type=Boom.type) == 1
    return job_id


# -- pages ----------------------------------------------------------------------------------


def test_the_overview_counts_jobs_by_type_and_status(queue: jobq.Queue, client: Client) -> None:
    queue.enqueue_many([Noop(), Noop()])
    queue.process_jobs(1)
    failed_job(queue)
    queue.enqueue(Record(1))

    html = page(client, "/")

    noop = re.search(r"<tr>\s*<td>noop</td>(.*?)</tr>", html, re.S)
    assert noop, html
    cells = re.findall(r'<td class="n[^"]*">\s*(?:<a [^>]*>)?(\d+)', noop.group(1))
    statuses = [str(status) for status in jobq.Status]
    assert dict(zip(statuses, map(int, cells), strict=False)) == {
        **dict.fromkeys(statuses, 0),
        "pending": 1,
        "completed": 1,
    }
    assert "<td>boom</td>" in html
    assert "<td>record</td>" in html
    assert "<strong>all types</strong>: 1 completed, 1 failed, backlog 2" in html
    assert "None: workers claim every type." in html
    # The oldest ready job's age, in the types' row, once it has waited a little.
    assert re.search(r"<td>record</td>.*?<td class=\"n\">\d+ s</td>", html, re.S)


def test_an_empty_queue_has_an_overview_too(client: Client) -> None:
    assert "No jobs yet." in page(client, "/")


def test_the_jobs_list_filters_by_status_and_type(queue: jobq.Queue, client: Client) -> None:
    done = queue.enqueue(Noop())
    queue.process_jobs(1)
    waiting = queue.enqueue(Noop())
    failed = failed_job(queue)

    def listed(path: str) -> list[int]:
        return [int(n) for n in re.findall(r'<a href="/jobs/(\d+)">', page(client, path))]

    assert listed("/jobs") == [failed, waiting, done]
    assert listed("/jobs?status=failed") == [failed]
    assert listed("/jobs?type=noop") == [waiting, done]
    assert listed("/jobs?type=noop&status=pending") == [waiting]
    assert listed("/jobs?type=other") == []


def test_the_jobs_list_pages_by_id(
    queue: jobq.Queue, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(web_views, "PAGE_SIZE", 2)
    ids = queue.enqueue_many([Noop() for _ in range(5)])

    seen: list[int] = []
    path: str | None = "/jobs?type=noop"
    while path is not None:
        html = page(client, path)
        seen += [int(n) for n in re.findall(r'<a href="/jobs/(\d+)">', html)]
        older = re.search(r'<a rel="next" href="([^"]+)">', html)
        path = older.group(1).replace("&amp;", "&") if older else None

    assert seen == ids[::-1]


@pytest.mark.parametrize("query", ["status=bogus", "before=abc", "type=%00"])
def test_a_bad_filter_is_a_bad_request_that_says_why(client: Client, query: str) -> None:
    response = client.get(f"/jobs?{query}")
    assert response.status_code == 400
    assert "Bad Request" in text(response)


def test_a_job_page_shows_its_payload_attempts_and_traceback(
    queue: jobq.Queue, client: Client
) -> None:
    job_id = failed_job(queue, "disk full")

    html = page(client, f"/jobs/{job_id}")

    assert '<span class="status status-failed" id="status">failed</span>' in html
    assert "1 of 1" in html
    assert "&#34;message&#34;: &#34;disk full&#34;" in html, "the payload, indented JSON"
    assert "Traceback (most recent call last)" in html
    assert "RuntimeError: disk full" in html


def test_a_running_job_shows_its_lease_host_and_pid(queue: jobq.Queue, client: Client) -> None:
    job_id = queue.enqueue(Noop())
    claim = queue.claim()
    assert claim is not None
    assert claim.id == job_id
    record = queue.get(job_id)
    assert record is not None

    html = page(client, f"/jobs/{job_id}")

    assert re.search(r"<dt>lease left</dt><dd>\d+ m \d+ s", html), html
    assert f"{record.host}, pid {record.pid}" in html


def test_the_overview_lists_each_worker_s_running_jobs(queue: jobq.Queue, client: Client) -> None:
    assert "No job runs now." in page(client, "/")
    queue.enqueue_many([Noop(), Noop(), Noop()])
    # One worker holding two attempts at once, as a --concurrency worker does.
    claims = queue.claim_many(2)
    assert len(claims) == 2
    record = queue.get(claims[0].id)
    assert record is not None

    html = page(client, "/")

    (row,) = re.findall(r'<table id="workers">.*?</table>', html, re.S)
    assert f"{record.host}, pid {record.pid}, {record.worker}" in row
    assert re.search(r'<td class="n">2</td>', row), row
    running = sorted(int(n) for n in re.findall(r'href="/jobs/(\d+)"', row))
    assert running == sorted(claim.id for claim in claims)


def test_a_job_claimed_behind_another_shows_as_claimed_not_running(
    queue: jobq.Queue, client: Client
) -> None:
    # A prefetching worker's batch: the first runs, the second waits in the worker.
    running, claimed = queue.enqueue_many([Noop(), Noop()])
    assert [claim.id for claim in queue.claim_many(2, queued=True)] == [running, claimed]

    assert '<span class="status status-claimed" id="status">claimed</span>' in page(
        client, f"/jobs/{claimed}"
    )
    assert 'id="status">in_progress</span>' in page(client, f"/jobs/{running}")
    (row,) = re.findall(r'<table id="workers">.*?</table>', page(client, "/"), re.S)
    assert re.search(r'<td class="n">1</td>', row), row
    assert f'href="/jobs/{claimed}">{claimed}</a> noop (claimed)' in row, row


def test_a_job_page_shows_the_unique_key_escaped(queue: jobq.Queue, client: Client) -> None:
    job_id = queue.enqueue(Noop(), unique_key="<b>import</b>:42")

    html = page(client, f"/jobs/{job_id}")

    assert '<dd id="unique-key">&lt;b&gt;import&lt;/b&gt;:42</dd>' in html


def test_the_schedules_page_lists_the_declared_schedules(
    queue: jobq.Queue, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "No periodic jobs: none is declared here" in page(client, "/schedules")
    declared = jobq.schedules.Schedules()
    monkeypatch.setattr(jobq.schedules, "REGISTERED", declared)
    monkeypatch.setattr(jobq.queue, "REGISTERED", declared)
    declared.add(
        periodic(
            "<nightly>", Noop(), "0 3 * * *", "Europe/Berlin", None, None, None, 0, False, True
        )
    )
    queue.run_schedules()  # the guard row: its next slot

    html = page(client, "/schedules")

    assert "<td>&lt;nightly&gt;</td>" in html
    assert "<code>cron 0 3 * * * Europe/Berlin</code>" in html


def test_an_unknown_job_is_not_found(client: Client) -> None:
    response = client.get("/jobs/987654")
    assert response.status_code == 404
    assert "There is no job 987654." in text(response)


def test_markup_in_a_payload_or_error_shows_as_text(queue: jobq.Queue, client: Client) -> None:
    job_id = failed_job(queue, SCRIPT)
    queue.enqueue(Noop(), type="<b>type</b>")

    pages = [page(client, "/"), page(client, "/jobs"), page(client, f"/jobs/{job_id}")]

    for html in pages:
        assert "<script>" not in html
        assert "<b>" not in html
    assert "&lt;script&gt;alert(&#39;owned&#39;)&lt;/script&gt;" in pages[2]
    assert "&lt;b&gt;type&lt;/b&gt;" in pages[0]


def test_no_page_shows_the_dsn(dsn: str, queue: jobq.Queue, client: Client) -> None:
    failed_job(queue)
    pages = [page(client, path) for path in ("/", "/jobs", "/jobs/1")]
    broken = jobq.Queue.connect(dsn)
    broken.close()  # every page on it fails on the database
    failure = Client(make_app(broken, credentials=Credentials())).get("/")
    assert failure.status_code == 500
    pages.append(text(failure))

    where = dsn.split("://", 1)[1]
    host, _, database = where.partition("/")
    for html in pages:
        assert dsn not in html
        assert (host or database) not in html, "nor where the database is"
    assert "Database error" in pages[-1]


# -- actions --------------------------------------------------------------------------------


def test_retry_puts_a_failed_job_back_and_says_so(queue: jobq.Queue, client: Client) -> None:
    job_id = failed_job(queue)

    html = text(post(client, f"/jobs/{job_id}/retry", f"/jobs/{job_id}"))

    assert f"Job {job_id} was put back to pending." in html, html
    assert 'id="status">pending</span>' in html
    record = queue.get(job_id)
    assert record is not None
    assert record.status == "pending"


def test_the_retry_notice_says_what_the_retry_did_whatever_came_after(
    queue: jobq.Queue, client: Client
) -> None:
    job_id = failed_job(queue)
    fields = {"csrf": csrf_token(client, f"/jobs/{job_id}")}
    response = client.post(f"/jobs/{job_id}/retry", data=fields)
    assert response.status_code == 303
    # A worker takes it before the browser follows the redirect, and it fails once more.
    assert queue.process_jobs(1, type=Boom.type) == 1

    html = text(client.get(response.headers["Location"]))

    assert f"Job {job_id} was put back to pending." in html, html
    assert "it is failed" not in html
    assert 'id="status">failed</span>' in html


def test_a_notice_is_said_once_by_the_page_its_action_left_it_for(
    queue: jobq.Queue, client: Client
) -> None:
    job_id = failed_job(queue)
    other = failed_job(queue)
    fields = {"csrf": csrf_token(client, f"/jobs/{job_id}")}
    assert client.post(f"/jobs/{job_id}/retry", data=fields).status_code == 303

    # Not on another page, which drops it; nor by its own page after that.
    assert 'class="notice"' not in page(client, f"/jobs/{other}")
    assert 'class="notice"' not in page(client, f"/jobs/{job_id}")


def test_a_notice_is_not_shown_to_another_browser(queue: jobq.Queue, client: Client) -> None:
    job_id = failed_job(queue)
    fields = {"csrf": csrf_token(client, f"/jobs/{job_id}")}
    posted = client.post(f"/jobs/{job_id}/retry", data=fields)
    sealed = posted.headers.getlist("Set-Cookie")
    notice = next(c for c in sealed if c.startswith("jobq_notice="))
    other = Client(client.application)
    page(other, "/")  # a cookie of its own
    other.set_cookie("jobq_notice", notice.split(";")[0].partition("=")[2])

    assert "was put back" not in page(other, f"/jobs/{job_id}")


@pytest.mark.parametrize(
    "query",
    [
        "done=limit-set&type=Call+0800+555+0100+now",
        "done=rate-cleared&type=Call+0800+555+0100+now",
        "done=not-paused&type=Call+0800+555+0100+now",
    ],
)
def test_no_address_puts_words_in_a_notice(client: Client, query: str) -> None:
    html = page(client, f"/?{query}")
    assert "0800" not in html
    assert 'class="notice"' not in html


def test_a_retry_that_does_not_apply_says_why(queue: jobq.Queue, client: Client) -> None:
    job_id = queue.enqueue(Noop())
    queue.process_jobs(1)

    assert 'id="retry"' not in page(client, f"/jobs/{job_id}"), "no button for it"
    html = text(post(client, f"/jobs/{job_id}/retry", "/"))

    assert f"Not retried: job {job_id} is completed; only failed" in html


def test_a_retry_refused_for_a_held_unique_key_names_the_holder(
    queue: jobq.Queue, client: Client
) -> None:
    job_id = queue.enqueue(Boom(), retry=NO_RETRY, unique_key="nightly")
    queue.process_jobs(1)
    holder = queue.enqueue(Noop(), unique_key="nightly")

    html = text(post(client, f"/jobs/{job_id}/retry", f"/jobs/{job_id}"))

    assert f"Not retried: job {holder} holds its unique key" in html, html


def test_cancel_ends_a_pending_job(queue: jobq.Queue, client: Client) -> None:
    job_id = queue.enqueue(Noop())

    html = text(post(client, f"/jobs/{job_id}/cancel", f"/jobs/{job_id}"))

    assert f"Job {job_id} was cancelled." in html
    record = queue.get(job_id)
    assert record is not None
    assert record.status == "cancelled"
    again = text(post(client, f"/jobs/{job_id}/cancel", "/"))
    assert f"Job {job_id} was not cancelled: it is cancelled." in again


def test_cancelling_a_running_job_says_its_attempt_is_stopped(
    queue: jobq.Queue, client: Client
) -> None:
    job_id = queue.enqueue(Noop())
    assert queue.claim() is not None

    html = text(post(client, f"/jobs/{job_id}/cancel", f"/jobs/{job_id}"))

    assert f"Job {job_id} is being cancelled: its running attempt is stopped" in html
    assert "<dt>cancel asked</dt>" in html


def test_pause_and_resume_a_type(queue: jobq.Queue, client: Client) -> None:
    queue.enqueue(Noop())

    paused = text(post(client, "/pause", "/", type="noop"))
    assert "Jobs of type noop are paused" in paused
    assert '<span class="paused">noop</span>' in paused
    assert queue.paused() == {"noop"}

    resumed = text(post(client, "/resume", "/", type="noop"))
    assert "Jobs of type noop are resumed." in resumed
    assert queue.paused() == set()


def test_the_overview_lists_limits_and_overrides_one(queue: jobq.Queue, client: Client) -> None:
    queue.enqueue_many([Limited("a", i) for i in range(3)])
    assert len(queue.claim_many(3)) == 2
    limits = page(client, "/").split('<table id="limits">')[1]
    row = re.search(r"<tr>\s*<td>limited</td>(.*?)</tr>", limits, re.S)
    assert row, "no limits row"
    cells = re.findall(r'<td class="n">([^<]*)</td>', row.group(1))
    assert cells == ["2", "2", "\u2013", "2", "1"]  # in force, declared, override, in use, blocked

    html = text(post(client, "/limit", "/", type="limited", concurrency="3"))
    assert "The concurrency limit of type limited is changed on every node." in html
    assert queue.limits()[0].override == 3
    refused = bad_request(client, "/limit", type="limited", concurrency="x")
    assert "concurrency must be a whole number from 1 to 1000000, got &#39;x&#39;" in refused
    html = text(post(client, "/limit", "/", type="limited", concurrency=""))
    assert "back to the concurrency limit its job class declares" in html
    assert queue.limits()[0].override is None


def test_the_overview_overrides_a_rate_as_it_does_a_concurrency(
    queue: jobq.Queue, client: Client
) -> None:
    queue.enqueue(Rated("v"))
    assert 'placeholder="3/1"' in page(client, "/").split('<table id="limits">')[1]
    html = text(post(client, "/rate", "/", type="rated", rate="5/60"))
    assert "The rate limit of type rated is changed on every node." in html
    (row,) = queue.limits()
    assert (row.override, row.per) == (5, 60)
    refused = bad_request(client, "/rate", type="rated", rate="5")
    assert "rate: a rate is N/SECONDS, e.g. 10/60 for 10 starts a minute" in refused
    html = text(post(client, "/rate", "/", type="rated", rate=""))
    assert "back to the rate limit its job class declares" in html
    (row,) = queue.limits()
    assert (row.override, row.per) == (None, 1)


def test_pausing_a_type_no_job_has_says_so_and_pauses_nothing(
    queue: jobq.Queue, client: Client
) -> None:
    queue.enqueue(Noop())  # for the overview's form
    html = text(post(client, "/pause", "/", type="nosuch"))

    assert "No job has type nosuch: it was not paused." in html
    assert queue.paused() == set()


def test_a_post_without_the_page_s_token_is_refused(queue: jobq.Queue, client: Client) -> None:
    job_id = failed_job(queue)
    token = csrf_token(client, f"/jobs/{job_id}")

    for fields in ({}, {"csrf": "0" * 64}):
        assert client.post(f"/jobs/{job_id}/retry", data=fields).status_code == 403
    stranger = Client(client.application)  # the token, but not the cookie it belongs to
    assert stranger.post(f"/jobs/{job_id}/retry", data={"csrf": token}).status_code == 403
    elsewhere = client.post(
        f"/jobs/{job_id}/retry", data={"csrf": token}, headers={"Origin": "https://evil.test"}
    )
    assert elsewhere.status_code == 403
    record = queue.get(job_id)
    assert record is not None
    assert record.status == "failed"


def test_a_read_only_page_has_no_buttons_and_refuses_actions(queue: jobq.Queue) -> None:
    job_id = failed_job(queue)
    client = Client(make_app(queue, read_only=True, credentials=Credentials()))

    html = page(client, f"/jobs/{job_id}") + page(client, "/")

    assert "<form" not in html.replace('<form method="get"', "")
    response = client.post(f"/jobs/{job_id}/retry", data={"csrf": "x"})
    assert response.status_code == 405
    record = queue.get(job_id)
    assert record is not None
    assert record.status == "failed"


# -- authentication -------------------------------------------------------------------------


@pytest.mark.databases("sqlite")
def test_a_bearer_token_is_required_when_configured(queue: jobq.Queue) -> None:
    client = Client(make_app(queue, credentials=Credentials(token="s3cret-token")))

    refused = client.get("/")
    assert refused.status_code == 401
    assert refused.headers["WWW-Authenticate"] == "Bearer"
    assert client.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200


@pytest.mark.databases("sqlite")
def test_http_basic_is_required_when_configured(queue: jobq.Queue) -> None:
    client = Client(make_app(queue, credentials=Credentials(user="ops", password="pa:ss")))

    def basic(pair: str) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}

    assert client.get("/").headers["WWW-Authenticate"].startswith("Basic ")
    assert client.get("/", headers=basic("ops:wrong")).status_code == 401
    assert client.get("/", headers=basic("root:pa:ss")).status_code == 401
    assert client.get("/", headers={"Authorization": "Basic !!"}).status_code == 401
    assert client.get("/", headers=basic("ops:pa:ss")).status_code == 200


@pytest.mark.databases("sqlite")
def test_credentials_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBQ_WEB_TOKEN", "t")
    assert Credentials.from_environment() == Credentials(token="t")
    monkeypatch.setenv("JOBQ_WEB_USER", "ops")
    with pytest.raises(jobq.ConfigurationError, match="JOBQ_WEB_USER is set but JOBQ_WEB_PASSWORD"):
        Credentials.from_environment()


# -- serving --------------------------------------------------------------------------------


@pytest.mark.databases("sqlite")
def test_it_mounts_in_an_asgi_application(queue: jobq.Queue) -> None:
    failed_job(queue)
    asgi = WsgiToAsgi(make_app(queue, credentials=Credentials()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "root_path": "/jobq",  # mounted under /jobq, as app.mount("/jobq", ...) does
        "path": "/jobq/jobs",
        "raw_path": b"/jobq/jobs",
        "query_string": b"status=failed",
        "headers": [(b"host", b"app.test")],
        "server": ("app.test", 80),
    }

    async def get() -> tuple[int, str]:
        exchange = ApplicationCommunicator(asgi, scope)
        await exchange.send_input({"type": "http.request", "body": b""})
        start = await exchange.receive_output(ASGI_TIMEOUT)
        body = b""
        while True:
            message = await exchange.receive_output(ASGI_TIMEOUT)
            body += message.get("body", b"")
            if not message.get("more_body"):
                return start["status"], body.decode()

    status, html = asyncio.run(get())

    assert status == 200
    assert '<a href="/jobq/jobs/1">1</a>' in html, "links stay under the mount point"


@pytest.fixture
def web_command(dsn: str, capsys: pytest.CaptureFixture[str]) -> Iterator[Callable[[str], str]]:
    """Run `jobq web --dsn DSN --bind BIND`, expecting exit code 2: its stderr. main() points
    jobq's logger at this test's captured stderr, closed once the test ends: the logger is
    put back as it was, so that no later test in this process logs to it."""
    logger = logging.getLogger("jobq")
    saved = (logger.handlers[:], logger.level, logger.propagate)

    def run(bind: str) -> str:
        assert cli.main(["web", "--dsn", dsn, "--bind", bind]) == 2
        return capsys.readouterr().err

    yield run
    logger.handlers[:], logger.level, logger.propagate = saved


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize("bind", ["0.0.0.0:8080", "[::]:8080", "db.internal:8080"])
def test_jobq_web_refuses_to_serve_beyond_loopback_without_authentication(
    web_command: Callable[[str], str], bind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("JOBQ_WEB_TOKEN", "JOBQ_WEB_USER", "JOBQ_WEB_PASSWORD"):
        monkeypatch.delenv(variable, raising=False)

    error = web_command(bind)

    assert "which is not a loopback address, without authentication" in error
    assert "JOBQ_WEB_TOKEN" in error


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize("bind", ["8080", "localhost:", "127.0.0.1:http", ":8080"])
def test_a_bind_that_is_not_host_and_port_is_refused(
    web_command: Callable[[str], str], bind: str
) -> None:
    assert "--bind must be HOST:PORT" in web_command(bind)


@pytest.mark.databases("postgresql")
def test_a_page_reopens_its_connection_once_the_database_dropped_it(dsn: str) -> None:
    opened: list[jobq.Queue] = []

    def reopen() -> jobq.Queue:
        opened.append(jobq.Queue.connect(dsn))
        return opened[-1]

    with jobq.Queue.connect(dsn) as queue, psycopg.connect(dsn, autocommit=True) as admin:
        queue.install()
        job_id = queue.enqueue(Noop())
        app = make_app(queue, credentials=Credentials(), reopen=reopen)
        client = Client(app)
        assert f"Job {job_id}" in page(client, f"/jobs/{job_id}")
        # What a restarted database or a failover does to the page's connection.
        admin.execute("SELECT pg_terminate_backend(%s)", (queue.connection.info.backend_pid,))

        assert f"Job {job_id}" in page(client, f"/jobs/{job_id}")

        assert len(opened) == 1
        assert app.queue is opened[0]
        opened[0].close()


@pytest.mark.databases("postgresql")
def test_without_a_way_to_reopen_a_dropped_connection_the_page_says_so(
    dsn: str, client: Client, queue: jobq.Queue
) -> None:
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (queue.connection.info.backend_pid,))

    response = client.get("/")

    assert response.status_code == 500
    assert "Database error" in text(response)


@pytest.mark.databases("sqlite")
def test_a_job_page_links_parents_and_children_and_shows_a_batch(
    queue: jobq.Queue, client: Client
) -> None:
    with queue.batch(then=Noop()) as batch:
        members = batch.enqueue_many([Noop(), Noop()])
    child = queue.enqueue(Noop(), after=[members[0]])
    queue.cancel(members[1])

    html = page(client, f"/jobs/{batch.id}")
    progress = re.search(r'<dd id="batch">(.*?)</dd>', html, re.S)
    assert progress, html
    assert re.sub(r"<[^>]+>|\s+", " ", progress.group(1)).split() == [
        "2", "members:", "1", "pending", "1", "cancelled", "(", "list", ")"
    ]  # fmt: skip
    html = page(client, f"/jobs/{members[0]}")
    children = re.search(r'<dd id="children">(.*?)</dd>', html, re.S)
    assert children, html
    assert re.findall(r">(\d+)</a>", children.group(1)) == [str(batch.id), str(child)]
    assert f'href="/jobs/{members[0]}"' in page(client, f"/jobs/{child}")
    listed = page(client, f"/jobs?batch={batch.id}").partition('<table id="jobs">')[2]
    assert [int(n) for n in re.findall(r'href="/jobs/(\d+)"', listed)] == members[::-1]


@pytest.mark.databases("sqlite")
def test_a_dependent_s_page_says_what_its_retry_would_wait_for_or_why_it_is_refused(
    queue: jobq.Queue, client: Client
) -> None:
    parent = queue.enqueue(Boom(), retry=NO_RETRY)
    child = queue.enqueue(Noop(), after=[parent])
    assert queue.cancel(child)
    html = page(client, f"/jobs/{child}")
    assert f'<dd id="on-retry">waits again for job(s) {parent}</dd>' in html, html
    assert 'id="retry"' in html

    assert queue.process_jobs(1) == 1
    html = page(client, f"/jobs/{child}")
    assert f"refused: job {child} waits for job {parent}, which ended failed" in html, html
    assert 'id="retry"' not in html, "no button for a retry that would be refused"

    assert queue.retry(parent)
    html = text(post(client, f"/jobs/{child}/retry", f"/jobs/{parent}"))
    assert f"Job {child} was put back: it waits for its parents" in html, html
    assert 'id="status">waiting</span>' in html


@pytest.mark.databases("postgresql", "mariadb")
def test_the_overview_names_what_holds_back_the_database_s_cleanup(
    client: Client, dsn: str, db_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(web_views, "HORIZON_SHOWN", 0.0)  # a snapshot held for a minute, now
    reader = drivers.connect(dsn, db_kind, autocommit=True)
    try:
        holder = drivers.hold_snapshot(reader, db_kind)
        html = client.get("/").text
    finally:
        reader.rollback()
        reader.close()
    assert 'id="horizon"' in html, html
    assert holder is not None
    assert holder in html
