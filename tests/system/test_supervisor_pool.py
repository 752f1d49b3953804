"""jobq-supervise's pool, with real processes: the timing rule's refusals, recycling, the job
timeout, crash loops and process titles."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

import jobq
from tests.support.apps import APPS
from tests.support.apps.supervised_app import Grow, Hold, Sleep
from tests.support.servers import free_port
from tests.support.supervising import FAST, events, supervisor, wait_for_events
from tests.support.waiting import wait_for

# The timing options at their minimums: 1 + 2 x 1 + 1 + 0 + 1 = 5 s, so the shortest lease is 6.
MINIMUMS = {
    "--renew-interval": "1",
    "--renew-timeout": "1",
    "--kill-grace": "0",
    "--safety-margin": "1",
}


pytestmark = pytest.mark.lease(6)


def options(**changes: str) -> list[str]:
    """The minimums with a lease of 6 s, some of them changed (underscores for dashes)."""
    chosen = {"--lease": "6", **MINIMUMS}
    chosen.update({"--" + name.replace("_", "-"): value for name, value in changes.items()})
    return [part for pair in chosen.items() for part in pair]


def supervise(
    *args: str, env: dict[str, str] | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """jobq-supervise run to its end through the command line."""
    return subprocess.run(
        [sys.executable, "-m", "jobq.supervisor", *args],
        env={**os.environ, "PYTHONPATH": str(APPS), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# -- the timing rule ---------------------------------------------------------------------------

ALL_TERMS = "renew_interval + 2 x renew_timeout + 1 s + kill_grace + 0.1 s + safety_margin < lease"


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"lease": "5"},
            [ALL_TERMS, "1 + 2 x 1 + 1 + 0 + 0.1 + 1 = 5.1 s, not below the 5 s lease"],
        ),
        # The defaults (10 + 2 x 5 + 1 + 5 + 0.1 + 5 = 31.1 s) need a lease over 31.1 s.
        (
            {"lease": "31", "renew_interval": "10", "renew_timeout": "5", "kill_grace": "5",
             "safety_margin": "5"},
            [ALL_TERMS, "10 + 2 x 5 + 1 + 5 + 0.1 + 5 = 31.1 s, not below the 31 s lease"],
        ),
    ],
    ids=["lease", "defaults"],
)  # fmt: skip
def test_the_timing_rule_refuses_to_start_naming_every_term(
    dsn: str, changes: dict[str, str], expected: list[str]
) -> None:
    result = supervise("--dsn", dsn, "--app", "supervised_app", *options(**changes))
    assert result.returncode == 2, result.stderr
    assert "refusing to start" in result.stderr
    for text in expected:
        assert text in result.stderr
    assert "Spawned worker" not in result.stderr


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize("name", ["renew_interval", "renew_timeout", "safety_margin"])
def test_timing_options_below_their_minimum_are_refused_by_name(dsn: str, name: str) -> None:
    result = supervise("--dsn", dsn, "--app", "supervised_app", *options(**{name: "0.5"}))
    assert result.returncode == 2, result.stderr
    flag = "--" + name.replace("_", "-")
    assert f"argument {flag}: must be at least 1 s, got 0.5" in result.stderr
    assert "Spawned worker" not in result.stderr


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize("lease", ["6", "20", "31"])
def test_a_lease_given_alone_fits_the_other_timing_options_to_it(dsn: str, lease: str) -> None:
    # The app cannot be imported, which the master checks right after the timing rule:
    # reaching that error means the rule let the lease through.
    result = supervise("--dsn", dsn, "--lease", lease, "--app", "no_such_app_module")
    assert result.returncode == 2, result.stderr
    assert "refusing to start" not in result.stderr
    assert "cannot import --app 'no_such_app_module'" in result.stderr


@pytest.mark.databases("sqlite")
def test_the_timing_rule_applies_to_options_from_the_environment(dsn: str) -> None:
    # Every term from the environment, as a container would set them.
    variables = {
        "JOBQ_DSN": dsn,
        "JOBQ_LEASE": "6",
        "JOBQ_RENEW_INTERVAL": "0.5",
        "JOBQ_RENEW_TIMEOUT": "1",
        "JOBQ_KILL_GRACE": "0",
        "JOBQ_SAFETY_MARGIN": "1",
    }
    result = supervise(env=variables)
    assert result.returncode == 2, result.stderr
    assert "JOBQ_RENEW_INTERVAL: must be at least 1 s, got 0.5" in result.stderr
    assert dsn not in result.stderr


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize("grace_period", ["20", "35"])
def test_a_pod_grace_period_too_short_for_a_drain_is_refused(dsn: str, grace_period: str) -> None:
    # As a Deployment passes it on: a graceful timeout of 30 s and a kill grace of 5 s need
    # more than 35 s, or Kubernetes kills the pod while its jobs still drain.
    variables = {
        "JOBQ_DSN": dsn,
        "JOBQ_GRACEFUL_TIMEOUT": "30",
        "JOBQ_KILL_GRACE": "5",
        "JOBQ_LEASE": "60",
        "JOBQ_TERMINATION_GRACE_PERIOD": grace_period,
    }
    result = supervise(env=variables)
    assert result.returncode == 2, result.stderr
    assert f"termination grace period ({grace_period} s) must be longer than" in result.stderr
    assert "Spawned worker" not in result.stderr


@pytest.mark.databases("sqlite")
def test_a_negative_kill_grace_is_refused(dsn: str) -> None:
    result = supervise("--dsn", dsn, *options(kill_grace="-1"))
    assert result.returncode == 2
    assert "--kill-grace" in result.stderr


@pytest.mark.databases("sqlite")
def test_the_shortest_lease_with_the_minimums_runs_jobs(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    queue.enqueue(Sleep(0, str(journal)))
    with supervisor(dsn, "--workers", "1", *options(), "--poll-interval", "0.2") as running:
        wait_for("the job to complete", lambda: queue.counts() == {"completed": 1})
        running.signal(signal.SIGTERM)
        assert running.wait() == 0
    assert "refusing" not in running.log


# -- recycling ---------------------------------------------------------------------------------


def test_workers_are_recycled_after_max_jobs_per_child(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    ids = [queue.enqueue(Sleep(0, str(journal))) for _ in range(6)]
    with supervisor(dsn, "--workers", "2", "--max-jobs-per-child", "2", *FAST) as running:
        wait_for("all jobs to complete", lambda: queue.counts() == {"completed": 6}, timeout=30)
        running.signal(signal.SIGTERM)
        assert running.wait() == 0
    starts = events(journal, "start")
    assert sorted(e["job"] for e in starts) == ids
    per_worker = Counter(e["pid"] for e in starts)
    assert max(per_worker.values()) <= 2, per_worker
    assert len(per_worker) >= 3, per_worker
    assert running.log.count("Recycling worker: 2 jobs done") >= 2


@pytest.mark.databases("sqlite")
def test_a_worker_over_max_memory_is_recycled_after_its_job(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    # Grow keeps 300 MiB allocated: over the 200 MiB ceiling, which a fresh worker is far below.
    before = [queue.enqueue(Sleep(0, str(journal))) for _ in range(2)]
    grow = queue.enqueue(Grow(300, str(journal)))
    after = queue.enqueue(Sleep(0, str(journal)))
    with supervisor(dsn, "--workers", "1", "--max-memory-per-child", "200", *FAST) as running:
        wait_for("all jobs to complete", lambda: queue.counts() == {"completed": 4}, timeout=30)
        running.signal(signal.SIGTERM)
        assert running.wait() == 0
    pid = {e["job"]: e["pid"] for e in events(journal, "start")}
    # Not recycled while under the ceiling, recycled between the big job and the next.
    assert pid[before[0]] == pid[before[1]] == pid[grow] != pid[after]
    assert "Recycling worker: RSS" in running.log
    end = events(journal, "end", grow)[0]["mono"]
    assert events(journal, "start", after)[0]["mono"] > end


# -- the job timeout ---------------------------------------------------------------------------


def run_past_job_timeout(queue: jobq.Queue, dsn: str, tmp_path: Path, ignore_term: bool) -> str:
    """Run a Hold job with --job-timeout 2; return its attempt's error."""
    journal, release = tmp_path / "journal", tmp_path / "release"
    job_id = queue.enqueue(
        Hold(str(journal), str(release), ignore_term=ignore_term),
        retry=jobq.RetryPolicy(max_attempts=1),
    )
    after = queue.enqueue(Sleep(0, str(journal)))
    # A kill grace of 0.5 s still passes the timing rule with a 6 s lease.
    args = [*FAST, "--kill-grace", "0.5", "--job-timeout", "2"]
    with supervisor(dsn, "--workers", "1", *args) as running:
        started = wait_for_events(journal, "start")[0]["mono"]
        wait_for("the attempt to fail", lambda: queue.counts().get("failed") == 1, timeout=15)
        failed = time.monotonic()
        wait_for("the next job to complete", lambda: queue.counts().get("completed") == 1)
        running.signal(signal.SIGTERM)
        assert running.wait() == 0
    # The master counts the 2 s from the claim, which the job's own start follows by the
    # time its worker takes to reach handle(): a loaded machine made that 60 ms.
    assert failed - started >= 1.5, "stopped before its timeout"
    assert not events(journal, "end", job_id), "the job ran to its end: it was not stopped"
    # Its worker was replaced: the next job ran elsewhere.
    assert events(journal, "start", after)[0]["pid"] != events(journal, "start", job_id)[0]["pid"]
    record = queue.get(job_id)
    assert record is not None
    assert record.last_error is not None
    assert "Job timed out after 2 s" in record.last_error, record.last_error
    return record.last_error


def test_a_job_past_job_timeout_is_stopped_and_its_attempt_failed(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    error = run_past_job_timeout(queue, dsn, tmp_path, ignore_term=False)
    assert "signal SIGTERM" in error


@pytest.mark.databases("sqlite")
def test_a_job_that_ignores_sigterm_is_killed_after_the_kill_grace(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    error = run_past_job_timeout(queue, dsn, tmp_path, ignore_term=True)
    assert "signal SIGKILL" in error


# -- crash loops -------------------------------------------------------------------------------


def crash_loop(dsn: str, *extra: str) -> tuple[subprocess.CompletedProcess[str], float]:
    begun = time.monotonic()
    result = supervise(
        "--dsn", dsn, "--app", "supervised_app", "--workers", "2", *FAST, *extra, timeout=30
    )
    return result, time.monotonic() - begun


def assert_stopped_crash_loop(result: subprocess.CompletedProcess[str], elapsed: float) -> None:
    assert result.returncode == 1, result.stderr[-3000:]
    assert elapsed < 30
    assert "Workers keep exiting before they are ready" in result.stderr
    # Bounded work: a few spawns with backoff, not thousands; no error flood from the helpers.
    spawned = result.stderr.count("Spawned worker")
    assert spawned <= 5 + 2, result.stderr[-3000:]
    assert result.stderr.count("Supervisor database work failed") <= 10


SECRET = "n0t-for-logs"


@pytest.mark.parametrize(
    "unreachable",
    [
        f"postgresql://jobq:{SECRET}@127.0.0.1:{{port}}/jobq",
        f"mysql://jobq:{SECRET}@127.0.0.1:{{port}}/jobq",
    ],
    ids=["postgresql", "mariadb"],
)
def test_workers_that_cannot_connect_stop_the_supervisor(unreachable: str, tmp_path: Path) -> None:
    # A port that was free a moment ago: nothing listens there, so connecting is refused. (A
    # missing SQLite file is refused at start: see test_schema_check.py.)
    dsn = unreachable.format(port=free_port())
    result, elapsed = crash_loop(dsn)
    assert_stopped_crash_loop(result, elapsed)
    # Out of reach at start is not a refusal: it may be an outage the workers would wait out.
    assert "Could not check the database's schema" in result.stderr
    assert "Worker cannot start" in result.stderr
    assert SECRET not in result.stderr


# -- process titles ----------------------------------------------------------------------------


class TitleWatch:
    """Samples the titles of the master and everything under it until stopped."""

    def __init__(self, sample: Callable[[], dict[int, str]]) -> None:
        self.sample = sample
        self.seen: list[tuple[int, str]] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.watch, daemon=True)
        self.thread.start()

    def watch(self) -> None:
        while not self.done.wait(0.01):  # sampling pace, not a synchronisation
            self.seen.extend(self.sample().items())

    def stop(self) -> list[tuple[int, str]]:
        self.done.set()
        self.thread.join(5)
        return self.seen


@pytest.mark.databases("postgresql")
def test_titles_show_the_pool_and_jobs_but_never_the_dsn(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    # Trust authentication ignores the password, so this DSN works and carries a secret.
    user, rest = dsn.removeprefix("postgresql://").split("@", 1)
    secret = "s3cret-pw"
    with_password = f"postgresql://{user}:{secret}@{rest}"
    database = rest.rsplit("/", 1)[1]
    journal, release = tmp_path / "journal", tmp_path / "release"
    job_id = queue.enqueue(Hold(str(journal), str(release)))
    # A slow import, so the master's title can be seen before the app is loaded.
    slow = {"SUPERVISED_APP_IMPORT_DELAY": "3"}
    args = ["--workers", "2", "--type", "hold", "--type", "sleep", *FAST]
    with supervisor(with_password, *args, env=slow) as running:

        def master_title() -> str:
            return running.titles().get(running.pid, "")

        # From its first moment the title is the command line without the password, then
        # the master's own, set before the app's import ended (which logs "started"): `ps`
        # during a slow start never shows the DSN's secret.
        wait_for("the master's title", lambda: master_title().startswith("jobq-supervise"))
        assert secret not in master_title()
        wait_for("the master's starting title", lambda: "starting" in master_title())
        assert "jobq-supervise started" not in running.log
        watch = TitleWatch(running.titles)
        try:
            wait_for_events(journal, "start", timeout=30)
            wait_for(
                "the master's title to show its pool",
                lambda: "master 2/2 workers [hold,sleep] running" in master_title(),
            )
            busy = events(journal, "start")[0]["pid"]
            wait_for(
                "the busy worker's title",
                lambda: re.fullmatch(
                    rf"jobq-supervise: worker job {job_id} hold Hold \d+s",
                    running.titles().get(busy, ""),
                ),
            )
            wait_for(
                "an idle worker's title",
                lambda: "jobq-supervise: worker idle" in running.titles().values(),
            )
            for helper in ("renewer", "housekeeper"):
                assert f"jobq-supervise: {helper}" in running.titles().values()
            running.signal(signal.SIGTERM)
            wait_for("the draining title", lambda: master_title().endswith("draining"))
            release.touch()
            assert running.wait() == 0
        finally:
            seen = watch.stop()
    assert len({pid for pid, _ in seen}) >= 5  # master, renewer, housekeeper, 2 workers
    for pid, title in seen:
        assert secret not in title, (pid, title)
        assert database not in title, (pid, title)
        assert "postgresql" not in title, (pid, title)
