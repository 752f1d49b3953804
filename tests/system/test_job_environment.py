"""What a job's subprocess inherits of jobq's environment: none of its secrets (the DSN
with its password, the status page's credentials), whichever runner runs it; the settings
that are no secret stay, and the job itself still reaches its queue by Queue.connect()."""

from __future__ import annotations

import sys

import pytest

import jobq
from tests.support.apps.supervised_app import Environment
from tests.support.supervising import supervisor

PASSWORD = "s3cret-pw"
RUNNERS = {
    "supervise": ["-m", "jobq.supervisor", "--workers", "1"],
    "work": ["-m", "jobq", "work", "--max-jobs", "1"],
}
WAIT = 60.0


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_a_job_s_subprocess_inherits_none_of_jobq_s_secrets(
    runner: str, postgresql_dsn: str
) -> None:
    # The test server trusts loopback: the password is carried, and never asked for.
    dsn = postgresql_dsn.replace("@", f":{PASSWORD}@", 1)
    secrets = {
        "JOBQ_DSN": dsn,
        "JOBQ_LISTEN_DSN": dsn,
        "JOBQ_WEB_USER": "ops",
        "JOBQ_WEB_PASSWORD": "web-pw",
        "JOBQ_WEB_TOKEN": "web-token",
        "JOBQ_WEB_SECRET": "web-key",
    }
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        job_id = queue.enqueue(Environment())
        argv = [sys.executable, *RUNNERS[runner], "--app", "supervised_app"]
        env = {**secrets, "JOBQ_LEASE": "600"}
        with supervisor(dsn, env=env, command=argv):
            record = queue.wait(job_id, timeout=WAIT)
    assert record.status == "completed", record.last_error
    seen = record.result["variables"]
    assert not set(secrets) & set(seen), seen
    assert not any(PASSWORD in value for value in seen.values()), seen
    assert seen["JOBQ_LEASE"] == "600"
    assert record.result["reached"]
