"""`jobq web` with both roles' tokens in its environment, over HTTP: the read-only token sees
and may not act, the operator's acts, and either alone lets it serve beyond loopback."""

from __future__ import annotations

import re

import httpx
import pytest

import jobq
from tests.support.jobs import Boom
from tests.support.paths import REPO
from tests.support.web import jobq_web

NO_RETRY = jobq.RetryPolicy(max_attempts=1)
SECRETS = {"JOBQ_WEB_TOKEN": "operator-7f3c", "JOBQ_WEB_READ_ONLY_TOKEN": "viewer-2b91"}
TIMEOUT = 15.0


def as_bearer(variable: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {SECRETS[variable]}"}


@pytest.mark.databases("sqlite")
def test_jobq_web_gives_each_token_its_role(dsn: str, queue: jobq.Queue) -> None:
    job_id = queue.enqueue(Boom("x"), retry=NO_RETRY)
    assert queue.process_jobs(1, type=Boom.type) == 1
    viewer, operator = as_bearer("JOBQ_WEB_READ_ONLY_TOKEN"), as_bearer("JOBQ_WEB_TOKEN")
    with (
        jobq_web(dsn, cwd=REPO, secrets=SECRETS) as address,
        httpx.Client(base_url=address, timeout=TIMEOUT) as client,
    ):
        assert client.get("jobs").status_code == 401
        seen = client.get(f"jobs/{job_id}", headers=viewer)
        assert seen.status_code == 200
        assert "read-only" in seen.text
        assert 'id="retry"' not in seen.text
        for secret in SECRETS.values():
            assert secret not in seen.text

        page = client.get(f"jobs/{job_id}", headers=operator)
        token = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
        assert token, page.text
        form = {"csrf": token.group(1)}
        refused = client.post(f"jobs/{job_id}/retry", data=form, headers=viewer)
        assert refused.status_code == 405
        assert queue.get(job_id).status is jobq.Status.FAILED  # type: ignore[union-attr]
        done = client.post(f"jobs/{job_id}/retry", data=form, headers=operator)
        assert done.status_code == 303
    assert queue.get(job_id).status is jobq.Status.PENDING  # type: ignore[union-attr]


@pytest.mark.databases("sqlite")
def test_a_read_only_token_alone_lets_jobq_web_serve_beyond_loopback(
    dsn: str, queue: jobq.Queue
) -> None:
    only_viewers = {"JOBQ_WEB_READ_ONLY_TOKEN": SECRETS["JOBQ_WEB_READ_ONLY_TOKEN"]}
    with jobq_web(dsn, "--bind", "0.0.0.0:0", cwd=REPO, secrets=only_viewers) as address:
        local = address.replace("0.0.0.0", "127.0.0.1")
        answer = httpx.get(local, headers=as_bearer("JOBQ_WEB_READ_ONLY_TOKEN"), timeout=TIMEOUT)
        assert answer.status_code == 200
        assert "read-only" in answer.text
