"""The supervisor's /metrics, /healthz and /readyz, and its JSON logs, on real processes.

The live-Prometheus test (test_metrics_live.py) proves the dashboard and the alerts; these
tests look at the endpoint itself: that scraping it hard does not get in the way of the
renewals, that a scrape storm does not turn into a query storm, that no label leaks what it
must not, and what the probes answer.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psutil
import psycopg
import pytest

import jobq
from jobq.supervisor.metrics import DEPTH_FRESH
from tests.support.apps.supervised_app import Crash, Fail, Hold, Sleep
from tests.support.supervising import (
    FAST,
    LOG_LINE,
    Scrape,
    Supervisor,
    events,
    http_get,
    metrics_address,
    metrics_port,
    scrape,
    supervisor,
    wait_for_events,
)
from tests.support.waiting import wait_for

# A retry that starts at once, so a failing job's second attempt shows up within the test.
ONCE_MORE = jobq.RetryPolicy(max_attempts=2, backoff=0, jitter=False)
SINGLE = jobq.RetryPolicy(max_attempts=1)
# Log lines that would mean a renewal round went wrong or a lease was given up on.
RENEWAL_TROUBLE = (
    "Lease renewal timed out",
    "Lease renewal failed",
    "cannot be renewed in time",
    "to another attempt",
)
KILL_REASONS = ("renewal", "self_fence", "lost", "job_timeout", "memory", "shutdown")


pytestmark = pytest.mark.lease(6)


def wait_ready(port: int, running: Supervisor) -> None:
    """/readyz turns 200 once a worker is ready and the first maintenance run got through."""
    wait_for(
        f"/readyz to answer 200; log:\n{running.log}",
        lambda: http_get(port, "/readyz")[0] == 200,
        30,
    )


def stop(running: Supervisor) -> None:
    running.signal(signal.SIGTERM)
    assert running.wait() == 0, running.log


# -- (a) scrapes do not slow the renewals ------------------------------------------------------

WORKERS = 8
SCRAPERS = 8
# More renewal rounds than fit in one 6 s lease at one round a second: a lease that stopped
# being extended meanwhile would have run out, and its worker would have been fenced.
ROUNDS = 8
# Each scraper stops at this many scrapes even if the rounds never come.
MAX_SCRAPES = 20_000


class Scrapers:
    """Threads scraping /metrics back to back until told to stop (or MAX_SCRAPES each)."""

    def __init__(self, port: int, count: int) -> None:
        self.port = port
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.done = 0
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(count)]

    def __enter__(self) -> Scrapers:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=30)
        assert not any(t.is_alive() for t in self.threads), "a scraper did not stop"

    def run(self) -> None:
        for _ in range(MAX_SCRAPES):
            if self.stopping.is_set():
                return
            try:
                status, _ = http_get(self.port, "/metrics")
                problem = None if status == 200 else f"status {status}"
            except OSError as error:
                problem = repr(error)
            with self.lock:
                self.done += 1
                if problem is not None:
                    self.errors.append(problem)


@pytest.mark.databases("sqlite")
def test_concurrent_scrapes_do_not_slow_the_renewals(
    dsn: str, queue: jobq.Queue, tmp_path: Path
) -> None:
    journal, release = tmp_path / "journal", tmp_path / "release"
    ids = [queue.enqueue(Hold(str(journal), str(release))) for _ in range(WORKERS)]
    args = ("--workers", str(WORKERS), *FAST, "--metrics-port", "0")
    with supervisor(dsn, *args) as running:
        port = metrics_port(running)
        wait_for_events(journal, "start", WORKERS)
        wait_for(
            "the master to see every worker busy",
            lambda: scrape(port).value("jobq_workers", state="busy") == WORKERS,
        )
        extended_before = scrape(port).value("jobq_lease_renewals_total", result="extended")
        leases_before = {job_id: lease_until(queue, job_id) for job_id in ids}

        with Scrapers(port, SCRAPERS) as scrapers:
            wanted = extended_before + WORKERS * ROUNDS
            wait_for(
                f"{ROUNDS} renewal rounds' worth of extensions under the scrapes",
                lambda: (
                    scrape(port).value("jobq_lease_renewals_total", result="extended") >= wanted
                ),
                60,
            )
        assert not scrapers.errors, scrapers.errors[:10]
        assert scrapers.done >= SCRAPERS  # every scraper got at least one through

        # Every lease, not only the total, moved on in the database while being scraped.
        leases_after = {job_id: lease_until(queue, job_id) for job_id in ids}
        assert all(leases_after[i] > leases_before[i] for i in ids), (leases_before, leases_after)
        during = scrape(port)
        assert during.value("jobq_lease_renewals_total", result="error") == 0
        assert during.value("jobq_lease_renewals_total", result="lost") == 0
        assert {r: during.value("jobq_workers_killed_total", reason=r) for r in KILL_REASONS} == {
            r: 0 for r in KILL_REASONS
        }
        assert during.value("jobq_worker_restarts_total") == 0
        assert during.value("jobq_workers", state="busy") == WORKERS

        release.touch()
        wait_for("every job to complete", lambda: queue.counts() == {"completed": WORKERS}, 30)
        stop(running)
    trouble = [line for line in running.lines if any(t in line for t in RENEWAL_TROUBLE)]
    assert not trouble, trouble
    assert sorted((e["job"], e["attempt"]) for e in events(journal, "start")) == [
        (job_id, 1) for job_id in sorted(ids)
    ]
    assert sorted(e["job"] for e in events(journal, "end")) == sorted(ids)


def lease_until(queue: jobq.Queue, job_id: int) -> datetime:
    record = queue.get(job_id)
    assert record is not None, record
    assert record.lease_until is not None, record
    return record.lease_until


# -- (b) a scrape storm costs one depth query --------------------------------------------------

STORM_THREADS = 4
STORM_SCRAPES = 50  # per thread


def tally(path: Path) -> Counter[str]:
    """What count_depth_work (supervised_app) wrote: "request" and "read" lines."""
    return Counter(path.read_text().split()) if path.exists() else Counter()


@contextmanager
def counting_supervisor(dsn: str, counts: Path) -> Iterator[tuple[Supervisor, int]]:
    """A supervisor that counts its own depth work (see count_depth_work): the master's
    requests, synchronously before each scrape is answered, and the housekeeper's reads. That
    is exact on every database, where the database's own statistics (pg_stat_statements)
    would need a preloaded extension and would also count the workers' polling.

    Maintenance (which reads the depth too) runs once at start, then not for an hour, so
    every later read is one a scrape asked for. Only "sleep" jobs are run, so "hold" jobs
    stay pending. Yields it, ready, and its metrics port."""
    args = ("--workers", "1", *FAST, "--maintenance-interval", "3600", "--type", "sleep")
    env = {"SUPERVISED_APP_DEPTH_LOG": str(counts)}
    with supervisor(
        dsn, *args, "--metrics-port", "0", env=env, entry="counting_supervisor"
    ) as running:
        port = metrics_port(running)
        wait_ready(port, running)
        yield running, port


@pytest.mark.databases("sqlite")
def test_a_scrape_storm_costs_one_depth_query_per_freshness_period(
    dsn: str, queue: jobq.Queue, tmp_path: Path
) -> None:
    counts = tmp_path / "depth"
    with counting_supervisor(dsn, counts) as (running, port):
        wait_for("the start-up maintenance's depth read", lambda: tally(counts)["read"] >= 1)
        before = tally(counts)
        assert before["request"] == 0, "nothing scraped /metrics yet"

        done: list[int] = []

        def storm() -> None:
            done.extend(http_get(port, "/metrics")[0] for _ in range(STORM_SCRAPES))

        threads = [threading.Thread(target=storm) for _ in range(STORM_THREADS)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        lasted = time.monotonic() - started
        assert done == [200] * STORM_THREADS * STORM_SCRAPES

        requests = tally(counts)["request"] - before["request"]
        # At most one request per freshness period the storm spanned: one for a storm under
        # DEPTH_FRESH, which is what a storm usually is (none if the start-up reading is
        # still fresh). Measured, not assumed, so a slow machine cannot fail this.
        assert requests <= 1 + int(lasted // DEPTH_FRESH), (requests, lasted)
        # Each request costs the housekeeper exactly one read, and nothing else read.
        wait_for(
            "the housekeeper to answer every request",
            lambda: tally(counts)["read"] - before["read"] >= requests,
        )
        assert tally(counts)["read"] - before["read"] == requests

        # The cache does not freeze the figures: a job added now shows on a later scrape.
        queue.enqueue(Hold(str(tmp_path / "journal"), str(tmp_path / "release")))
        wait_for(
            "the new pending job in jobq_queue_jobs",
            lambda: scrape(port).value("jobq_queue_jobs", type="hold", status="pending") == 1,
        )
        stop(running)


@pytest.mark.databases("sqlite", "postgresql")
def test_a_single_scrape_shows_the_queue_as_it_was_at_most_depth_fresh_before(
    dsn: str, queue: jobq.Queue, tmp_path: Path
) -> None:
    counts = tmp_path / "depth"
    with counting_supervisor(dsn, counts) as (running, port):
        assert scrape(port).value("jobq_queue_jobs", type="hold") == 0
        for _ in range(3):
            queue.enqueue(Hold(str(tmp_path / "journal"), str(tmp_path / "release")))
        # Every reading made so far is now older than the freshness the README promises, so
        # the next scrape, this very one and not a later one, must show the new jobs.
        enqueued = time.monotonic()
        wait_for("DEPTH_FRESH to pass", lambda: time.monotonic() - enqueued > DEPTH_FRESH)
        before = tally(counts)["request"]
        assert scrape(port).value("jobq_queue_jobs", type="hold", status="pending") == 3
        assert tally(counts)["request"] == before + 1, "one reading, asked for by the scrape"

        # A housekeeper that cannot answer holds a scrape back only briefly: it gets the last
        # figures read (an unbounded hold would run into http_get's timeout).
        housekeeper = next(p for p, t in running.titles().items() if "housekeeper" in t)
        os.kill(housekeeper, signal.SIGSTOP)
        try:
            stopped = time.monotonic()
            wait_for("DEPTH_FRESH to pass", lambda: time.monotonic() - stopped > DEPTH_FRESH)
            assert scrape(port).value("jobq_queue_jobs", type="hold", status="pending") == 3
        finally:
            os.kill(housekeeper, signal.SIGCONT)
        stop(running)


# -- (c) label hygiene -------------------------------------------------------------------------

MARKER = "LEAKMARKER7f3a"
ALLOWED_LABELS = {
    "type", "outcome", "result", "reason", "state", "stat", "status", "le", "helper", "pool",
    "version", "database", "lease_seconds", "renew_interval_seconds", "listener",
}  # fmt: skip
# Job ids far from any number a label holds (lease seconds, bucket bounds), so that finding
# one in a label value means a job id leaked.
FIRST_ID = 900_000_001


def with_password(dsn: str, password: str) -> str:
    parts = urlsplit(dsn)
    netloc = f"{parts.username}:{password}@{parts.hostname}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


@pytest.mark.databases("postgresql")
def test_no_label_carries_a_job_id_an_error_text_a_dsn_or_a_password(
    dsn: str, tmp_path: Path
) -> None:
    # The test server trusts local connections, so any password is accepted; it still
    # travels in the DSN the supervisor is given, which is what could leak.
    password = "Pw-" + MARKER[::-1]
    secret_dsn = with_password(dsn, password)
    database = urlsplit(dsn).path.lstrip("/")
    journal = str(tmp_path / "journal")
    with psycopg.connect(dsn, autocommit=True) as connection:
        jobq.Queue.from_connection(connection).install()
        connection.execute(
            "SELECT setval(pg_get_serial_sequence('jobq_jobs', 'id'), %s, false)", (FIRST_ID,)
        )
    with jobq.Queue.connect(secret_dsn, lease_duration=6) as queue:
        message = f"{MARKER} could not reach {secret_dsn} ({password})"
        ids = [queue.enqueue(Fail(message, journal), retry=ONCE_MORE) for _ in range(2)]
        ids += [queue.enqueue(Sleep(0, journal)) for _ in range(3)]
        ids.append(queue.enqueue(Crash(journal), retry=SINGLE))
        with supervisor(secret_dsn, "--workers", "2", *FAST, "--metrics-port", "0") as running:
            port = metrics_port(running)
            wait_for(
                "every job to finish",
                lambda: queue.counts() == {"completed": 3, "failed": 3},
                30,
            )
            # Until the depth shows them too, the figures read from the database lag.
            wait_for(
                "the finished jobs in jobq_queue_jobs",
                lambda: scrape(port).value("jobq_queue_jobs", status="failed") == 3,
            )
            scraped = scrape(port)
            probes = [http_get(port, path)[1] for path in ("/healthz", "/readyz")]
            stop(running)
        failing = queue.get(ids[0])
    # The marker really is in what the database stores, so there was something to leak.
    assert failing is not None
    assert failing.last_error is not None
    assert MARKER in failing.last_error
    assert min(ids) >= FIRST_ID

    assert scraped.value("jobq_jobs_failed_total", type="fail", outcome="retried") == 2
    assert scraped.value("jobq_jobs_failed_total", type="fail", outcome="failed") == 2
    names = {name for sample in scraped.samples for name in sample.labels}
    assert names <= ALLOWED_LABELS, names - ALLOWED_LABELS
    values = {value for sample in scraped.samples for value in sample.labels.values()}
    secrets = [MARKER, password, database, secret_dsn, "postgresql://", "@"]
    leaked = {v for v in values if any(s in v for s in secrets + [str(i) for i in ids])}
    assert not leaked, leaked
    assert {s.labels["type"] for s in scraped.samples if "type" in s.labels} == {
        "fail",
        "sleep",
        "crash",
    }
    # Nor anywhere else in what the endpoint serves: HELP texts, values, the probes' bodies.
    for text in (scraped.text, *probes):
        assert not [s for s in (MARKER, password, database) if s in text], text


# -- (d) JSON logs -----------------------------------------------------------------------------

REQUIRED = {"time", "level", "message", "pid"}
JOB_FIELDS = {"job_id", "job_type", "attempt", "event"}
LEVELS = {"debug", "info", "warning", "error", "critical"}


def json_entries(running: Supervisor) -> list[dict[str, Any]]:
    """Every line the supervisor wrote (master, helpers and workers), each parsed as one
    JSON object with the fields every line must have."""
    entries = []
    assert running.lines, "the supervisor wrote nothing"
    for line in running.lines:
        try:
            entry = json.loads(line)
        except ValueError:
            pytest.fail(f"not a JSON line: {line!r}")
        assert isinstance(entry, dict), line
        assert entry.keys() >= REQUIRED, line
        assert entry["level"] in LEVELS, line
        assert isinstance(entry["pid"], int), line
        assert isinstance(entry["message"], str), line
        datetime.fromisoformat(entry["time"])
        entries.append(entry)
    return entries


@pytest.mark.databases("sqlite")
def test_json_logs_are_one_object_per_line_with_the_jobs_fields(
    dsn: str, queue: jobq.Queue, tmp_path: Path
) -> None:
    journal = str(tmp_path / "journal")
    completing = [queue.enqueue(Sleep(0, journal)) for _ in range(3)]
    failing = queue.enqueue(Fail("no luck", journal), retry=ONCE_MORE)
    with supervisor(dsn, "--workers", "2", *FAST, "--log-format", "json") as running:
        wait_for("every job to finish", lambda: queue.counts() == {"completed": 3, "failed": 1})
        stop(running)
    entries = json_entries(running)
    # The master's lines and the workers' lines: the format reaches the forked processes.
    assert running.pid in {entry["pid"] for entry in entries}

    # A line is about a job when it names one; "event" alone also marks the master's own
    # lines (started, spawned, ...).
    about_jobs = [entry for entry in entries if JOB_FIELDS & (entry.keys() - {"event"})]
    for entry in about_jobs:
        assert entry.keys() >= JOB_FIELDS, entry
    seen = {(e["job_id"], e["job_type"], e["attempt"], e["event"]) for e in about_jobs}
    assert all(e["pid"] != running.pid for e in about_jobs if e["event"] == "running")
    for job_id in completing:
        assert {(job_id, "sleep", 1, "running"), (job_id, "sleep", 1, "completed")} <= seen
    assert {
        (failing, "fail", 1, "running"),
        (failing, "fail", 1, "failed"),
        (failing, "fail", 2, "running"),
        (failing, "fail", 2, "failed"),
    } <= seen


@pytest.mark.databases("sqlite")
def test_json_lines_the_master_writes_about_a_job_carry_its_type_and_attempt(
    dsn: str, queue: jobq.Queue, tmp_path: Path
) -> None:
    journal = str(tmp_path / "journal")
    held = queue.enqueue(Hold(journal, str(tmp_path / "never"), limit=30), retry=SINGLE)
    args = ("--workers", "1", *FAST, "--job-timeout", "1", "--log-format", "json")
    with supervisor(dsn, *args) as running:
        wait_for("the job to time out", lambda: queue.counts() == {"failed": 1}, 30)
        stop(running)
    entries = json_entries(running)
    timed_out = [e for e in entries if e.get("event") == "job_timeout"]
    assert timed_out, entries
    assert all(e.get("job_id") == held for e in timed_out), entries
    for entry in timed_out:
        assert entry.keys() >= JOB_FIELDS, entry


# "2026-12-02 10:40:05,853 INFO jobq[28141]: message": jobq.logs' plain format.
PLAIN_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ jobq\[\d+\]: ")


@pytest.mark.databases("sqlite")
def test_plain_text_logs_stay_the_default(
    dsn: str, queue: jobq.Queue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JOBQ_LOG_FORMAT", raising=False)  # the harness passes the environment on
    job_id = queue.enqueue(Sleep(0, str(tmp_path / "journal")))
    with supervisor(dsn, "--workers", "1", *FAST) as running:
        wait_for("the job to complete", lambda: queue.counts() == {"completed": 1})
        stop(running)
    for line in running.lines:
        assert PLAIN_LINE.match(line), line
        assert LOG_LINE.search(line), line
        assert not line.lstrip().startswith("{"), line
    # The job's fields are appended to its lines in plain text too.
    assert any(
        line.endswith(f"(job_id={job_id} job_type=sleep attempt=1)")
        and f"Job {job_id} completed" in line
        for line in running.lines
    ), running.log


# -- (e) the probes and the endpoint -----------------------------------------------------------


def listening(running: Supervisor) -> set[tuple[str, int]]:
    """The TCP addresses the master or any process under it listens on."""
    family = [psutil.Process(running.pid), *psutil.Process(running.pid).children(True)]
    found = set()
    for process in family:
        try:
            connections = process.net_connections(kind="inet")
        except psutil.NoSuchProcess:
            continue
        found |= {(c.laddr.ip, c.laddr.port) for c in connections if c.status == psutil.CONN_LISTEN}
    return found


@pytest.mark.databases("sqlite")
def test_the_probes_answer_and_unknown_paths_are_404(dsn: str, queue: jobq.Queue) -> None:
    with supervisor(dsn, "--workers", "1", *FAST, "--metrics-port", "0") as running:
        address, port = metrics_address(running)
        assert address == "127.0.0.1"  # the default: never every interface unless told
        assert listening(running) == {("127.0.0.1", port)}
        assert http_get(port, "/healthz") == (200, "ok\n")
        wait_ready(port, running)
        assert http_get(port, "/readyz") == (200, "ready\n")
        assert http_get(port, "/nothing-here")[0] == 404
        assert http_get(port, "/metrics/")[0] == 404
        assert http_get(port, "/metrics", method="POST")[0] == 405
        assert http_get(port, "/metrics?name[]=jobq_workers")[0] == 200
        stop(running)


@pytest.mark.databases("sqlite")
def test_without_a_metrics_port_nothing_listens(dsn: str, queue: jobq.Queue) -> None:
    with supervisor(dsn, "--workers", "2", *FAST) as running:
        running.wait_for_log(" ready", count=2)
        # Every process is up (master, renewer, housekeeper, fence keeper, both workers) and
        # none listens.
        assert len(psutil.Process(running.pid).children()) == 5
        assert listening(running) == set()
        stop(running)
    assert "Serving /metrics" not in running.log


# -- attempts the master fails are counted -----------------------------------------------------


@pytest.mark.databases("sqlite")
def test_an_attempt_whose_worker_died_is_counted_as_failed(
    dsn: str, queue: jobq.Queue, tmp_path: Path
) -> None:
    queue.enqueue(Crash(str(tmp_path / "journal")), retry=SINGLE)
    with supervisor(dsn, "--workers", "1", *FAST, "--metrics-port", "0") as running:
        port = metrics_port(running)
        wait_for("the attempt to fail", lambda: queue.counts() == {"failed": 1}, 30)
        # The depth is read after the failure was written, and the housekeeper answers in
        # order: once a scrape shows the failed job in the depth, the master has heard of
        # everything the housekeeper did before it.

        def after_the_failure() -> Scrape | None:
            scraped = scrape(port)
            return scraped if scraped.value("jobq_queue_jobs", status="failed") == 1 else None

        scraped = wait_for("the failed job in jobq_queue_jobs", after_the_failure)
        assert scraped.value("jobq_worker_restarts_total") == 1
        assert scraped.value("jobq_jobs_failed_total", type="crash", outcome="failed") == 1
        stop(running)
