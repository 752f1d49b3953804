"""The Grafana dashboard and the alert rules, evaluated by a real Prometheus scraping a real
supervisor doing real work on PostgreSQL.

One scenario serves the whole module, since Prometheus needs some seconds before it has
anything (target discovery is throttled to 5 s) and the jobs need a lease or two to play out:

- `jobq-supervise --workers 4 --metrics-port 0 --job-timeout 8`, with FAST renewal settings;
- a Prometheus on loopback scraping it every second and evaluating deploy/prometheus's rules;
- once Prometheus has a first sample (so every counter's rise is seen from its start): jobs
  that complete, jobs that fail once and then for good, one that crashes its worker (SIGKILL,
  so a restart), one that runs into --job-timeout, and one that is fenced: its token is
  changed in the database under it, so the next renewal round finds the lease lost, the
  master kills the worker, and maintenance requeues the job after its lease;
- then, once Prometheus has seen all that, a second wave of completing and failing jobs. A
  series with a `type` label only exists from its type's first event, and rate() counts only
  rises between samples, so a first burst that fits between two scrapes shows as a rate of 0
  (and the run-time quantiles as NaN); the second wave is what the rate panels see.

Every dashboard query and every alert expression is then evaluated at one moment after all
of that, so the tests read the same data in whatever order they run.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.error import HTTPError
from urllib.parse import urlencode
from urllib.request import urlopen

import psycopg
import pytest
import yaml

import jobq
from jobq.records import Status
from tests.support.apps.supervised_app import Crash, Fail, Hold, Sleep
from tests.support.dashboards import ALERT_RULES, alert_queries, dashboard_queries
from tests.support.servers import ServerInfo, free_port, fresh_postgresql_database, tail
from tests.support.supervising import FAST, Supervisor, events, http_get, metrics_port, supervisor
from tests.support.waiting import wait_for

JOB_TIMEOUT = 8  # longer than any job here but the one meant to run into it
WORKERS = 4
COMPLETING = 30
FAILING = 3
SECOND_COMPLETING = 10
SECOND_FAILING = 2
ONCE_MORE = jobq.RetryPolicy(max_attempts=2, backoff=0, jitter=False)
SINGLE = jobq.RetryPolicy(max_attempts=1)
# Bounds on the waits, far above what they take, so only a real fault reaches them.
PROMETHEUS_PATIENCE = 45.0
SCENARIO_PATIENCE = 60.0

# What Prometheus must have seen before anything is evaluated: each query returns a series
# once its part of the scenario is in a scraped sample.
SCENARIO_SEEN = (
    f'sum(jobq_jobs_completed_total{{type="sleep"}}) >= {COMPLETING}',
    'sum(jobq_jobs_completed_total{type="hold"}) >= 1',  # the fenced job's second attempt
    f'sum(jobq_jobs_failed_total{{type="fail", outcome="retried"}}) >= {FAILING}',
    f'sum(jobq_jobs_failed_total{{type="fail", outcome="failed"}}) >= {FAILING}',
    'sum(jobq_lease_renewals_total{result="lost"}) >= 1',
    'sum(jobq_workers_killed_total{reason="lost"}) >= 1',
    'sum(jobq_workers_killed_total{reason="job_timeout"}) >= 1',
    "sum(jobq_worker_restarts_total) >= 1",
    'sum(jobq_maintenance_recovered_total{outcome="requeued"}) >= 1',
    # The depth is read from the database after the jobs finished.
    f'sum(jobq_queue_jobs{{status="completed"}}) >= {COMPLETING + 1}',
)
SECOND_WAVE_SEEN = (
    f'sum(jobq_jobs_completed_total{{type="sleep"}}) >= {COMPLETING + SECOND_COMPLETING}',
    f'sum(jobq_jobs_failed_total{{type="fail", outcome="failed"}}) >= {FAILING + SECOND_FAILING}',
    f'sum(jobq_queue_jobs{{status="completed"}}) >= {COMPLETING + 1 + SECOND_COMPLETING}',
    f'sum(jobq_queue_jobs{{status="failed"}}) >= {FAILING + 2 + SECOND_FAILING}',
)


class Prometheus:
    """A throwaway Prometheus on loopback, scraping one target as job "jobq"."""

    def __init__(self, workdir: Path, target: str) -> None:
        exe = shutil.which("prometheus")
        if exe is None:
            pytest.fail("prometheus is not installed; scripts/install-test-deps installs it")
        workdir.mkdir(parents=True, exist_ok=True)
        config = {
            "global": {
                "scrape_interval": "1s",
                "scrape_timeout": "1s",
                "evaluation_interval": "1s",
            },
            "rule_files": [str(ALERT_RULES)],
            "scrape_configs": [{"job_name": "jobq", "static_configs": [{"targets": [target]}]}],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = workdir / "prometheus.log"
        self.base = f"http://127.0.0.1:{free_port()}"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    exe,
                    f"--config.file={workdir / 'prometheus.yml'}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    # Its default is 0.0.0.0:9090: every interface, and maybe a taken port.
                    f"--web.listen-address={self.base.removeprefix('http://')}",
                ],
                cwd=workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_for("Prometheus to be ready", self.ready, 30)
        except BaseException:
            self.stop()  # the fixture never gets hold of it to stop it
            raise

    def describe(self) -> str:
        return f"; its log:\n{tail(str(self.log))}"

    def ready(self) -> bool:
        if self.process.poll() is not None:
            pytest.fail(f"Prometheus exited with {self.process.returncode}{self.describe()}")
        with (
            contextlib.suppress(OSError),
            urlopen(f"{self.base}/-/ready", timeout=5) as response,
        ):
            return bool(response.status == 200)
        return False

    def get(self, path: str, **params: str) -> dict[str, Any]:
        """A decoded API answer, errors included (they come with status 400 or 422)."""
        url = f"{self.base}{path}?{urlencode(params)}"
        try:
            with urlopen(url, timeout=10) as response:
                answer: dict[str, Any] = json.load(response)
        except HTTPError as error:
            answer = json.load(error)
        return answer

    def query(self, expr: str, at: float | None = None) -> dict[str, Any]:
        params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        return self.get("/api/v1/query", **params)

    def series(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        answer = self.query(expr, at)
        assert answer["status"] == "success", (expr, answer)
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # it shuts down cleanly on SIGTERM
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


@dataclass
class Live:
    prometheus: Prometheus
    running: Supervisor
    queue: jobq.Queue
    port: int
    workdir: Path
    # The moment every evaluation reads: after the scenario, and after a scrape later still.
    at: float


@pytest.fixture(scope="module")
def live(postgresql_server: ServerInfo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    workdir = tmp_path_factory.mktemp("live")
    # metrics_app: supervised_app's jobs, and a schedule.
    args = (
        "--workers",
        str(WORKERS),
        *FAST,
        "--job-timeout",
        str(JOB_TIMEOUT),
        "--app",
        "metrics_app",
    )
    with (
        fresh_postgresql_database(postgresql_server) as dsn,
        jobq.Queue.connect(dsn, lease_duration=6) as queue,
    ):
        queue.install()
        with supervisor(dsn, *args, "--metrics-port", "0") as running:
            port = metrics_port(running)
            prometheus = Prometheus(workdir / "prometheus", f"127.0.0.1:{port}")
            try:
                wait_for(
                    f"Prometheus's first sample of the supervisor{prometheus.describe()}",
                    lambda: prometheus.series("jobq_supervisor_info"),
                    PROMETHEUS_PATIENCE,
                )
                play_scenario(queue, running, dsn, workdir)
                wait_until_seen(prometheus, running, SCENARIO_SEEN)
                play_second_wave(queue, running, workdir)
                seen_at = wait_until_seen(prometheus, running, SECOND_WAVE_SEEN)
                at = wait_for_a_scrape_after(prometheus, seen_at)
                yield Live(prometheus, running, queue, port, workdir, at)
            finally:
                prometheus.stop()


def play_scenario(queue: jobq.Queue, running: Supervisor, dsn: str, workdir: Path) -> None:
    journal = str(workdir / "journal")
    fence_release = workdir / "fence-release"
    # A limit in force, for the limit panels: its type gets no jobs, so both read 0.
    queue.set_limit("limited", 2)
    fenced = queue.enqueue(Hold(journal, str(fence_release), limit=30), retry=ONCE_MORE)
    # Never released: --job-timeout ends it.
    queue.enqueue(Hold(journal, str(workdir / "never"), limit=30), retry=SINGLE)
    queue.enqueue(Crash(journal), retry=SINGLE)
    for n in range(FAILING):
        queue.enqueue(Fail(f"failure {n}", journal), retry=ONCE_MORE)
    for _ in range(COMPLETING):
        queue.enqueue(Sleep(0.05, journal))

    wait_for(
        f"job {fenced} to start; log:\n{running.log}",
        lambda: events(workdir / "journal", "start", fenced),
        30,
    )
    # Another attempt "takes" the job: the next renewal round no longer extends this
    # worker's lease, and the master must kill it at once.
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("UPDATE jobq_jobs SET token = 'stolen' WHERE id = %s", (fenced,))
    running.wait_for_log(f"lost job {fenced} to another attempt")
    # Only now: released earlier, the fenced attempt might finish before the master saw the
    # loss. The second attempt, which maintenance requeues once the lease has run out, then
    # completes at once.
    fence_release.touch()

    expected = {"completed": COMPLETING + 1, "failed": FAILING + 2}
    wait_for(
        f"every job to finish as {expected}; log:\n{running.log}",
        lambda: queue.counts() == expected,
        SCENARIO_PATIENCE,
    )


def play_second_wave(queue: jobq.Queue, running: Supervisor, workdir: Path) -> None:
    journal = str(workdir / "journal")
    for n in range(SECOND_FAILING):
        queue.enqueue(Fail(f"failure {FAILING + n}", journal), retry=ONCE_MORE)
    for _ in range(SECOND_COMPLETING):
        queue.enqueue(Sleep(0.05, journal))
    expected = {
        "completed": COMPLETING + 1 + SECOND_COMPLETING,
        "failed": FAILING + 2 + SECOND_FAILING,
    }
    wait_for(
        f"the second wave to finish as {expected}; log:\n{running.log}",
        lambda: queue.counts() == expected,
        SCENARIO_PATIENCE,
    )


def wait_until_seen(prometheus: Prometheus, running: Supervisor, wanted: tuple[str, ...]) -> float:
    """Wait until every query in `wanted` returns a series from Prometheus's latest samples;
    return the moment it did."""
    deadline = time.monotonic() + PROMETHEUS_PATIENCE
    while True:
        now = time.time()
        missing = [expr for expr in wanted if not prometheus.series(expr, now)]
        if not missing:
            return now
        if time.monotonic() > deadline:
            pytest.fail(f"Prometheus never saw {missing}; supervisor log:\n{running.log}")
        time.sleep(0.2)  # the pace of the polling; the deadline above bounds the wait


def wait_for_a_scrape_after(prometheus: Prometheus, moment: float) -> float:
    """Wait for a scrape later than `moment`, so that every series seen by then has a second
    sample for rate() in its window; return a moment after that scrape."""

    def scraped_since() -> bool:
        last = prometheus.series('timestamp(up{job="jobq"})')
        return bool(last) and float(last[0]["value"][1]) > moment

    wait_for("a scrape after the scenario", scraped_since, PROMETHEUS_PATIENCE)
    return time.time()


def has_data(series: list[dict[str, Any]]) -> bool:
    """At least one series with a number: histogram_quantile() over a window without
    observations gives NaN for its series, which a panel would show as no data."""
    return any(math.isfinite(float(s["value"][1])) for s in series)


# -- the dashboard and the alerts --------------------------------------------------------------


def test_every_dashboard_query_returns_data(live: Live) -> None:
    queries = dashboard_queries()
    assert queries
    problems = []
    for title, expr in queries:
        answer = live.prometheus.query(expr, live.at)
        if answer["status"] != "success":
            problems.append(f"{title}: {expr}: {answer.get('error')}")
        elif not has_data(answer["data"]["result"]):
            problems.append(f"{title}: {expr}: {answer['data']['result']}")
    assert not problems, "\n".join(problems)


def test_every_alert_expression_evaluates(live: Live) -> None:
    queries = alert_queries()
    assert queries
    results = {}
    for name, expr in queries:
        answer = live.prometheus.query(expr, live.at)
        assert answer["status"] == "success", (name, expr, answer)
        results[name] = answer["data"]["result"]
    # The healthy conditions are quiet, but the fencing kill is there to be alerted on.
    assert {s["metric"].get("reason") for s in results["JobqFencingKills"]} == {"lost"}
    assert results["JobqSupervisorDown"] == []


def test_prometheus_loaded_every_rule_and_the_fencing_alert_fires(live: Live) -> None:
    expected = {name for name, _ in alert_queries()}

    def evaluated() -> list[dict[str, Any]]:
        groups = live.prometheus.get("/api/v1/rules")["data"]["groups"]
        rules = [rule for group in groups for rule in group["rules"]]
        # "unknown" until a rule's first evaluation; "err" with lastError if it failed.
        return rules if rules and all(r["health"] != "unknown" for r in rules) else []

    rules = wait_for("every rule to be evaluated", evaluated, PROMETHEUS_PATIENCE)
    assert {rule["name"] for rule in rules} == expected
    assert [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"] == []

    def firing() -> list[dict[str, Any]]:
        alerts = live.prometheus.get("/api/v1/alerts")["data"]["alerts"]
        return [
            a
            for a in alerts
            if a["labels"]["alertname"] == "JobqFencingKills" and a["state"] == "firing"
        ]

    alerts = wait_for("JobqFencingKills to fire", firing, PROMETHEUS_PATIENCE)
    assert {a["labels"]["reason"] for a in alerts} == {"lost"}


def test_prometheus_saw_the_scenario(live: Live) -> None:
    def value(expr: str) -> float:
        series = live.prometheus.series(expr, live.at)
        assert len(series) == 1, (expr, series)
        return float(series[0]["value"][1])

    assert value('up{job="jobq"}') == 1
    assert value("jobq_supervisor_info") == 1
    info = live.prometheus.series("jobq_supervisor_info", live.at)[0]["metric"]
    assert (info["database"], info["lease_seconds"]) == ("postgresql", "6")
    # The master counts what the database did: every completion, and the handlers' failures.
    # (Not yet the attempts the housekeeper failed for dead workers: see test_metrics.py.)
    assert value("sum(jobq_jobs_completed_total)") == COMPLETING + 1 + SECOND_COMPLETING
    assert value('sum(jobq_jobs_failed_total{outcome="failed"})') >= FAILING + SECOND_FAILING
    # The second wave is what the throughput and failure panels see.
    assert value('sum(rate(jobq_jobs_completed_total{type="sleep"}[1m]))') > 0
    assert value('sum(rate(jobq_jobs_failed_total{type="fail"}[1m]))') > 0
    assert value('sum(jobq_workers_killed_total{reason=~"renewal|memory|shutdown"})') == 0
    # The fenced job: one kill for the loss, and maintenance requeued it after its lease.
    assert value('jobq_workers_killed_total{reason="lost"}') == 1
    assert value('jobq_maintenance_recovered_total{outcome="requeued"}') == 1
    assert value('jobq_lease_renewals_total{result="extended"}') > 0
    assert value('sum(jobq_queue_jobs{status="failed"})') == FAILING + 2 + SECOND_FAILING


# -- the probes --------------------------------------------------------------------------------


def test_the_probes_while_running_and_while_draining(live: Live) -> None:
    # This ends the supervisor, so it comes last; the tests above evaluate at `live.at`,
    # which is before it, so they would pass in any order.
    port, running = live.port, live.running
    assert http_get(port, "/healthz") == (200, "ok\n")
    wait_for("/readyz to answer 200", lambda: http_get(port, "/readyz")[0] == 200)
    journal, release = live.workdir / "drain-journal", live.workdir / "drain-release"
    held = live.queue.enqueue(Hold(str(journal), str(release), limit=30), retry=SINGLE)
    wait_for("the job to start", lambda: events(journal, "start", held), 30)

    running.signal(signal.SIGTERM)
    # Not ready while draining, however long the job in flight takes; alive all the same.
    _, body = wait_for(
        "/readyz to answer 503 while draining",
        answer_with(lambda: http_get(port, "/readyz"), 503),
    )
    assert "draining" in body, body
    assert http_get(port, "/healthz") == (200, "ok\n")
    assert running.process.poll() is None  # still draining: the job holds it

    release.touch()
    assert running.wait() == 0, running.log
    record = live.queue.get(held)
    assert record is not None, record
    assert record.status is Status.COMPLETED, record


def answer_with(
    ask: Callable[[], tuple[int, str]], wanted: int
) -> Callable[[], tuple[int, str] | None]:
    def check() -> tuple[int, str] | None:
        answer = ask()
        return answer if answer[0] == wanted else None

    return check
