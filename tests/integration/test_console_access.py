"""Who may do what on the console: the operator and read-only roles, by credentials or by the
application that mounts it, and the console mounted under a prefix by plain WSGI."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable

import pytest
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.test import Client, TestResponse
from werkzeug.wrappers import Response

import jobq
from jobq.errors import ConfigurationError
from jobq.web import Credentials, make_app
from jobq.web.app import URLS
from jobq.web.auth import ROLE_KEY
from tests.support.jobs import Boom, Noop

NO_RETRY = jobq.RetryPolicy(max_attempts=1)
OPERATOR_TOKEN = "op-secret-8d1f"
VIEWER_TOKEN = "view-secret-c27a"
VIEWER_PASSWORD = "pw-view-91b3"
ROLES = Credentials(
    token=OPERATOR_TOKEN,
    read_only_user="viewer",
    read_only_password=VIEWER_PASSWORD,
    read_only_token=VIEWER_TOKEN,
)
SCRIPT = "<script>alert('owned')</script>"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def basic(user: str, password: str) -> dict[str, str]:
    pair = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {pair}"}


def failed_job(queue: jobq.Queue) -> int:
    job_id = queue.enqueue(Boom("boom"), retry=NO_RETRY)
    assert queue.process_jobs(1, type=Boom.type) == 1
    return job_id


def token_of(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, html
    return match.group(1)


def post_paths(job_id: int) -> list[str]:
    """Every address the console takes a POST at, a job's with this job's id."""
    paths = []
    for rule in URLS.iter_rules():
        if rule.methods and "POST" in rule.methods:
            paths.append(rule.rule.replace("<int:job_id>", str(job_id)))
    return paths


def links(html: str) -> list[str]:
    return re.findall(r'(?:href|action|src)="([^"]*)"', html)


def pages(job_id: int) -> Iterable[str]:
    return ("/", "/jobs", "/jobs?status=failed", f"/jobs/{job_id}", "/schedules", "/live")


@pytest.mark.databases("sqlite")
def test_the_read_only_role_sees_every_page_and_no_button(queue: jobq.Queue) -> None:
    job_id = failed_job(queue)
    client = Client(make_app(queue, credentials=ROLES))
    for headers in (bearer(VIEWER_TOKEN), basic("viewer", VIEWER_PASSWORD)):
        html = client.get(f"/jobs/{job_id}", headers=headers).get_data(as_text=True)
        assert "read-only" in html
        assert 'id="retry"' not in html
        assert "<form" not in client.get("/", headers=headers).get_data(as_text=True)
    html = client.get(f"/jobs/{job_id}", headers=bearer(OPERATOR_TOKEN)).get_data(as_text=True)
    assert 'id="retry"' in html
    assert "read-only" not in html


@pytest.mark.databases("sqlite")
def test_the_read_only_role_is_refused_every_post(queue: jobq.Queue) -> None:
    job_id = failed_job(queue)
    client = Client(make_app(queue, credentials=ROLES))
    # A token the operator's page gave, so that only the role can be why a POST is refused.
    csrf = token_of(client.get(f"/jobs/{job_id}", headers=bearer(OPERATOR_TOKEN)).get_data(True))
    form = {"csrf": csrf, "type": Boom.type, "action": "retry", "id": str(job_id), "value": "1"}
    paths = post_paths(job_id)
    assert f"/jobs/{job_id}/retry" in paths
    assert "/jobs/act" in paths
    for path in paths:
        refused = client.post(path, data=form, headers=bearer(VIEWER_TOKEN))
        assert refused.status_code == 405, (path, refused.get_data(as_text=True))
    assert queue.get(job_id).status == "failed"  # type: ignore[union-attr]
    assert not queue.paused()

    done = client.post(f"/jobs/{job_id}/retry", data=form, headers=bearer(OPERATOR_TOKEN))
    assert done.status_code == 303
    assert queue.get(job_id).status == "pending"  # type: ignore[union-attr]


@pytest.mark.databases("sqlite")
def test_no_secret_of_either_role_is_ever_shown(queue: jobq.Queue) -> None:
    job_id = failed_job(queue)
    client = Client(make_app(queue, credentials=ROLES))
    for headers in (bearer(OPERATOR_TOKEN), bearer(VIEWER_TOKEN)):
        for path in pages(job_id):
            answer = client.get(path, headers=headers)
            shown = answer.get_data(as_text=True) + str(answer.headers)
            for secret in (OPERATOR_TOKEN, VIEWER_TOKEN, VIEWER_PASSWORD):
                assert secret not in shown, path


@pytest.mark.databases("sqlite")
def test_a_wrong_secret_for_either_role_is_refused(queue: jobq.Queue) -> None:
    client = Client(make_app(queue, credentials=ROLES))
    for headers in (
        bearer("op-secret"),
        basic("viewer", OPERATOR_TOKEN),
        basic("admin", VIEWER_PASSWORD),
        {},
    ):
        refused = client.get("/", headers=headers)
        assert refused.status_code == 401
        assert refused.headers["WWW-Authenticate"].startswith("Basic")


def test_each_role_s_credentials_come_from_the_environment() -> None:
    environ = {"JOBQ_WEB_TOKEN": "a", "JOBQ_WEB_READ_ONLY_TOKEN": "b"}
    credentials = Credentials.from_environment(environ)
    assert credentials.admit("Bearer a") == "operator"
    assert credentials.admit("Bearer b") == "read-only"
    assert credentials.admit("Bearer c") is None
    only_viewers = Credentials.from_environment({"JOBQ_WEB_READ_ONLY_TOKEN": "b"})
    assert only_viewers.configured
    assert only_viewers.admit("Bearer b") == "read-only"
    with pytest.raises(ConfigurationError, match="JOBQ_WEB_READ_ONLY_PASSWORD is not"):
        Credentials.from_environment({"JOBQ_WEB_READ_ONLY_USER": "viewer"})
    with pytest.raises(ConfigurationError, match="a token of its own"):
        Credentials.from_environment({"JOBQ_WEB_TOKEN": "a", "JOBQ_WEB_READ_ONLY_TOKEN": "a"})


def mounted(queue: jobq.Queue, prefix: str, role: str | None = None) -> Client:
    """The console under `prefix` of a plain WSGI application, which puts its own user's
    role in the environ, as an application's login middleware would."""
    console = make_app(queue, credentials=Credentials())

    def with_role(environ: dict[str, object], start_response: object) -> Iterable[bytes]:
        if role is not None:
            environ[ROLE_KEY] = role
        return console(environ, start_response)  # type: ignore[arg-type]

    home = Response("the application's own page")
    return Client(DispatcherMiddleware(home, {prefix: with_role}))


@pytest.mark.databases("sqlite")
def test_mounted_under_a_prefix_every_link_and_form_stays_under_it(queue: jobq.Queue) -> None:
    job_id = failed_job(queue)
    with queue.batch(then=Noop()) as batch:
        parent = batch.enqueue(Noop())
    child = queue.enqueue(Noop(), after=[parent])
    client = mounted(queue, "/ops/jobq")
    shown = [f"/jobs/{each}" for each in (parent, child, batch.id)] + [f"/jobs?batch={batch.id}"]
    for path in [*pages(job_id), *shown]:
        answer = client.get(f"/ops/jobq{path}")
        assert answer.status_code == 200, path
        found = links(answer.get_data(as_text=True))
        outside = [link for link in found if not link.startswith(("/ops/jobq/", "#", "?"))]
        assert outside == [], path
    assert client.get("/").get_data(as_text=True) == "the application's own page"

    html = client.get(f"/ops/jobq/jobs/{job_id}").get_data(as_text=True)
    done = client.post(f"/ops/jobq/jobs/{job_id}/retry", data={"csrf": token_of(html)})
    assert done.status_code == 303
    assert done.headers["Location"] == f"/ops/jobq/jobs/{job_id}"
    assert "jobq_csrf" in done.request.headers.get("Cookie", "")
    said = client.get(done.headers["Location"]).get_data(as_text=True)
    assert f"Job {job_id} was put back" in said, said


@pytest.mark.databases("sqlite")
def test_the_host_application_s_read_only_role_is_refused_every_post(queue: jobq.Queue) -> None:
    job_id = failed_job(queue)
    client = mounted(queue, "/jobq", role="read-only")
    html = client.get(f"/jobq/jobs/{job_id}").get_data(as_text=True)
    assert "read-only" in html
    assert 'id="retry"' not in html
    for path in post_paths(job_id):
        # 405 and not 403: refused for the role, before its token (none) is checked.
        refused: TestResponse = client.post(f"/jobq{path}", data={"csrf": "0" * 64})
        assert refused.status_code == 405, path
    assert queue.get(job_id).status == "failed"  # type: ignore[union-attr]


@pytest.mark.databases("sqlite")
def test_markup_in_the_mount_prefix_is_escaped_in_every_link(queue: jobq.Queue) -> None:
    job_id = failed_job(queue)
    client = mounted(queue, '/x"><script>')
    for path in pages(job_id):
        html = client.get(f'/x"><script>{path}').get_data(as_text=True)
        assert "<script>" not in html, path
        assert '"><' not in "".join(links(html)), path
