"""jobq.testing as an application's test suite uses it: a test file of its own, run by
pytest in a subprocess with jobq's plugin loaded from its entry point, on in-memory SQLite
and on the test's PostgreSQL or MariaDB database (JOBQ_TEST_DSN); the failure messages as
printed. The async suite runs on anyio's pytest plugin, as an application's might."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import jobq
import pytest
from jobq.testing import assert_enqueued, drain, enqueued, perform, refute_enqueued

ON = {}  # the queue the jobs enqueue on, set by each test


class Welcome(jobq.Job):
    type = "email"

    def __init__(self, address):
        self.address = address

    def handle(self):
        if self.address == "bad":
            raise ValueError("no such mailbox")
        claim = jobq.current_claim()
        return f"sent to {self.address} in attempt {claim.attempt}"


class Signup(jobq.Job):
    type = "signup"

    def __init__(self, address):
        self.address = address

    def handle(self):
        ON["queue"].enqueue(Welcome(self.address), priority=ON.get("priority", 0))


def test_what_was_enqueued(jobq_queue):
    jobq_queue.enqueue(Welcome("ada"))
    jobq_queue.enqueue(Signup("bob"), delay=60)
    assert assert_enqueued(jobq_queue, Welcome, address="ada").type == "email"
    assert_enqueued(jobq_queue, "signup")
    refute_enqueued(jobq_queue, Welcome, address="bob")
    assert [job.type for job in enqueued(jobq_queue)] == ["email", "signup"]


def test_a_missing_job_is_told_with_what_was_enqueued(jobq_queue):
    jobq_queue.enqueue(Welcome("ada"))
    assert_enqueued(jobq_queue, Welcome, address="bob")


def test_an_unwanted_job_is_named(jobq_queue):
    jobq_queue.enqueue(Welcome("ada"))
    refute_enqueued(jobq_queue, "email")


def test_drain_runs_what_is_ready_and_what_it_enqueues(jobq_queue):
    ON["queue"] = jobq_queue
    jobq_queue.enqueue(Signup("ada"))
    jobq_queue.enqueue(Welcome("bad"), retry=jobq.RetryPolicy(max_attempts=2))
    later = jobq_queue.enqueue(Welcome("cy"), delay=3600)
    drained = drain(jobq_queue)
    assert (drained.completed, drained.retried, drained.failed) == (2, 1, 0)
    assert "no such mailbox" in next(iter(drained.errors.values()))
    assert "sent to ada in attempt 1" in drained.results.values()
    assert jobq_queue.get(later).status == "pending"
    again = drain(jobq_queue, with_scheduled=True)
    assert (again.completed, again.failed) == (1, 1)
    assert refute_enqueued(jobq_queue) is None


def test_drain_without_recursion_runs_only_what_was_pending(jobq_queue):
    ON["queue"], ON["priority"] = jobq_queue, 10  # the welcome is claimed before "bad"
    jobq_queue.enqueue(Signup("dee"))
    bad = jobq_queue.enqueue(Welcome("bad"), retry=jobq.RetryPolicy(max_attempts=2))
    drained = drain(jobq_queue, with_scheduled=True, with_recursion=False)
    assert (drained.completed, drained.retried) == (1, 1)
    welcome = assert_enqueued(jobq_queue, Welcome, address="dee")
    assert (welcome.status, welcome.attempts) == ("pending", 0)
    assert (jobq_queue.get(bad).status, jobq_queue.get(bad).attempts) == ("pending", 1)
    assert drain(jobq_queue).completed == 1


def test_perform_runs_one_job_as_a_worker_would():
    assert perform(Welcome("ada")) == "sent to ada in attempt 1"
    with pytest.raises(ValueError, match="no such mailbox"):
        perform(Welcome("bad"))
"""


ASYNC_SUITE = """
import asyncio

import jobq
import pytest
from jobq.testing import assert_enqueued, drain, enqueued, refute_enqueued

pytestmark = pytest.mark.anyio
ON = {}  # the queue the jobs enqueue on, and the loop the coroutine job ran on


@pytest.fixture
def anyio_backend():
    return "asyncio"


class Parse(jobq.Job):
    type = "parse"

    def __init__(self, url):
        self.url = url

    def handle(self):
        return f"parsed {self.url}"


class Fetch(jobq.Job):
    type = "fetch"

    def __init__(self, url):
        self.url = url

    async def handle(self):
        ON["loop"] = asyncio.get_running_loop()
        await ON["queue"].enqueue(Parse(self.url))
        return f"fetched {self.url} in attempt {jobq.current_claim().attempt}"


async def test_await_drain_runs_coroutine_and_plain_jobs(jobq_async_queue):
    ON["queue"] = jobq_async_queue
    await jobq_async_queue.enqueue(Fetch("a"))
    drained = await drain(jobq_async_queue)
    assert sorted(drained.results.values()) == ["fetched a in attempt 1", "parsed a"]
    assert ON["loop"] is asyncio.get_running_loop()
    assert await jobq_async_queue.counts() == {"completed": 2}


async def test_the_assertions_read_an_async_queue_and_it_reads_each_drain(jobq_async_queue):
    ON["queue"] = jobq_async_queue
    fetch = await jobq_async_queue.enqueue(Fetch("c"))
    # Read before the drain, on the AsyncQueue's own connection: it must see the drain's ends.
    assert (await jobq_async_queue.get(fetch)).status == "pending"
    assert assert_enqueued(jobq_async_queue, Fetch, url="c").id == fetch
    refute_enqueued(jobq_async_queue, "parse")
    await drain(jobq_async_queue, with_recursion=False)
    assert (await jobq_async_queue.get(fetch)).status == "completed"
    (parse,) = enqueued(jobq_async_queue, Parse, url="c")
    await drain(jobq_async_queue)
    assert (await jobq_async_queue.get(parse.id)).result == "parsed c"
    assert await jobq_async_queue.counts() == {"completed": 2}
    refute_enqueued(jobq_async_queue)


async def test_an_async_queue_of_its_own_is_refused(jobq_async_queue):
    with pytest.raises(TypeError, match="jobq_async_queue fixture"):
        drain(jobq.AsyncQueue(jobq_async_queue.driver))


async def test_without_recursion_what_the_jobs_enqueue_is_left(jobq_async_queue):
    ON["queue"] = jobq_async_queue
    await jobq_async_queue.enqueue(Fetch("b"))
    drained = await drain(jobq_async_queue, with_recursion=False)
    assert list(drained.results.values()) == ["fetched b in attempt 1"]
    (left,) = await jobq_async_queue.jobs("pending")
    assert (left.type, left.attempts) == ("parse", 0)
    assert (await drain(jobq_async_queue, "parse")).results == {left.id: "parsed b"}
"""


def run_suite(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, db_kind: str, dsn: str, suite: str
) -> pytest.RunResult:
    """`suite` as an application's test file, run by pytest in a subprocess on in-memory or
    temporary SQLite, or with JOBQ_TEST_DSN naming the test's PostgreSQL or MariaDB database."""
    if db_kind == "sqlite":
        monkeypatch.delenv("JOBQ_TEST_DSN", raising=False)
    else:
        monkeypatch.setenv("JOBQ_TEST_DSN", dsn)
    pytester.makepyfile(test_app=suite)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)


@pytest.mark.databases("sqlite", "postgresql", "mariadb")
def test_an_applications_suite_uses_the_helpers(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, db_kind: str, dsn: str
) -> None:
    result = run_suite(pytester, monkeypatch, db_kind, dsn, SUITE)
    result.assert_outcomes(passed=4, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: no Welcome(address='bob') was enqueued; enqueued instead: "
            'job * test_app.Welcome (type email) {"address":"ada"}',
            "*AssertionError: expected no email enqueued, found: "
            'job * test_app.Welcome (type email) {"address":"ada"}',
        ]
    )


@pytest.mark.databases("sqlite", "postgresql", "mariadb")
def test_an_async_suite_drains_its_async_queue(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, db_kind: str, dsn: str
) -> None:
    run_suite(pytester, monkeypatch, db_kind, dsn, ASYNC_SUITE).assert_outcomes(passed=4)
