"""The `jobq` command line, run as real subprocesses against every database."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import jobq
from jobq import RetryPolicy, Status
from jobq.outcomes import LEASE_EXPIRED_BEFORE_START
from tests.support.apps import APPS
from tests.support.apps.jobs_app import AppendLine, Explode, WaitForRelease
from tests.support.web import jobq_web

REPO_DIR = Path(jobq.__file__).resolve().parent.parent
# Every subprocess call and every polling loop is bounded by one of these.
COMMAND_TIMEOUT = 60.0
WAIT_TIMEOUT = 20.0
ONCE = RetryPolicy(max_attempts=1)


def wait_for(what: str, condition: Callable[[], bool], timeout: float = WAIT_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def base_env(**extra: str) -> dict[str, str]:
    """The test's environment without any JOBQ_* of its own, able to import jobq and jobs_app."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("JOBQ_")}
    paths = [str(APPS), str(REPO_DIR), *filter(None, [env.get("PYTHONPATH")])]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def ok(self) -> Result:
        assert self.returncode == 0, f"exit {self.returncode}\n{self.output}"
        assert "Traceback" not in self.output, self.output
        return self

    def refused(self, *returncodes: int) -> Result:
        """A clean failure: an expected exit status and a message, never a traceback."""
        assert self.returncode in returncodes, f"exit {self.returncode}\n{self.output}"
        assert "Traceback" not in self.output, self.output
        assert self.stderr.strip(), "no error message"
        return self


@dataclass
class Cli:
    cwd: Path
    dsn: str

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "jobq", *args]

    def run(self, *args: str, env: dict[str, str] | None = None, with_dsn: bool = True) -> Result:
        """Run `jobq ARGS`, with --dsn of the test's database unless with_dsn is False."""
        argv = [*args, "--dsn", self.dsn] if with_dsn else list(args)
        done = subprocess.run(
            self.command(*argv),
            cwd=self.cwd,
            env=env or base_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
        )
        return Result(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def cli(tmp_path: Path, dsn: str) -> Cli:
    # A working directory of its own, so that the embedded default DSN (a file in the working
    # directory) could never be the test's database by accident.
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    return Cli(cwd, dsn)


@pytest.fixture
def queue(dsn: str) -> Iterator[jobq.Queue]:
    with jobq.Queue.connect(dsn) as queue:
        yield queue


def status_of(queue: jobq.Queue, job_id: int) -> tuple[Status, int]:
    record = queue.get(job_id)
    assert record is not None, f"job {job_id} is gone"
    return record.status, record.attempts


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


# -- migrate -------------------------------------------------------------------------------


def test_migrate_twice_is_idempotent(cli: Cli, queue: jobq.Queue, tmp_path: Path) -> None:
    version = len(type(queue.backend).migrations)
    assert f"created the schema (version {version})" in cli.run("migrate").ok().stdout
    job_id = queue.enqueue(AppendLine(str(tmp_path / "out"), "kept"))

    assert f"already current (version {version})" in cli.run("migrate").ok().stdout

    # A second run that recreated the tables would have lost the job.
    assert status_of(queue, job_id) == (Status.PENDING, 0)
    # One row per schema version, each recorded once.
    versions = len(queue.backend.migrations)
    assert queue.backend.fetchone("SELECT count(*) FROM jobq_schema")[0] == versions


# -- work ----------------------------------------------------------------------------------


def test_work_runs_jobs_then_stops_at_max_jobs(cli: Cli, queue: jobq.Queue, tmp_path: Path) -> None:
    queue.install()
    out = tmp_path / "out"
    ids = [queue.enqueue(AppendLine(str(out), word)) for word in ("one", "two", "three")]
    boom = queue.enqueue(Explode("kaboom 42"), retry=ONCE)
    spare = queue.enqueue(AppendLine(str(out), "four"))

    result = cli.run("work", "--app", "jobs_app", "--max-jobs", "4").ok()

    assert lines(out) == ["one", "two", "three"]
    assert [status_of(queue, job_id) for job_id in ids] == [(Status.COMPLETED, 1)] * 3
    assert status_of(queue, boom) == (Status.FAILED, 1)
    record = queue.get(boom)
    assert record is not None
    assert record.last_error is not None
    assert "RuntimeError: kaboom 42" in record.last_error
    # --max-jobs counts attempts, failed ones included: the fifth job was left alone.
    assert status_of(queue, spare) == (Status.PENDING, 0)
    assert len(re.findall(r"Job \d+ completed", result.stderr)) == 3


def test_work_without_the_app_fails_attempts_cleanly(
    cli: Cli, queue: jobq.Queue, tmp_path: Path
) -> None:
    queue.install()
    job_id = queue.enqueue(AppendLine(str(tmp_path / "out"), "x"), retry=ONCE)

    cli.run("work", "--max-jobs", "1").ok()

    assert status_of(queue, job_id) == (Status.FAILED, 1)
    record = queue.get(job_id)
    assert record is not None
    assert record.last_error is not None
    assert "unknown job class 'jobs_app.AppendLine'" in record.last_error
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--type", "a", "--type", "b"], {}),
        ([], {"JOBQ_TYPE": " a, b ,"}),
        (["--type", "a", "--type", "b"], {"JOBQ_TYPE": "c"}),
    ],
    ids=["options", "env", "options-over-env"],
)
def test_work_type_filters(
    cli: Cli, queue: jobq.Queue, tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    queue.install()
    out = tmp_path / "out"
    # "c" first: a worker ignoring the filter would take it before the others.
    c = queue.enqueue(AppendLine(str(out), "c"), type="c")
    a = queue.enqueue(AppendLine(str(out), "a"), type="a")
    b = queue.enqueue(AppendLine(str(out), "b"), type="b")

    cli.run("work", "--app", "jobs_app", "--max-jobs", "2", *args, env=base_env(**env)).ok()

    assert lines(out) == ["a", "b"]
    assert status_of(queue, a) == status_of(queue, b) == (Status.COMPLETED, 1)
    assert status_of(queue, c) == (Status.PENDING, 0)


# -- stats and prune -----------------------------------------------------------------------


def make_history(queue: jobq.Queue, tmp_path: Path) -> dict[str, int]:
    """append: 1 completed, 1 in progress, 1 pending; explode: 1 failed."""
    queue.install()
    out = str(tmp_path / "out")
    ids = {
        "completed": queue.enqueue(AppendLine(out, "1")),
        "in_progress": queue.enqueue(AppendLine(out, "2")),
        "pending": queue.enqueue(AppendLine(out, "3")),
        "failed": queue.enqueue(Explode("x"), retry=ONCE),
    }
    first = queue.claim("append")
    assert first is not None
    assert first.id == ids["completed"]
    assert queue.complete(first)
    second = queue.claim("append")
    assert second is not None
    assert second.id == ids["in_progress"]
    failing = queue.claim("explode")
    assert failing is not None
    assert queue.fail(failing, "failed on purpose")
    return ids


def parse_table(text: str) -> dict[str, dict[str, int]]:
    *table, retention = (line for line in text.splitlines() if line.strip())
    assert retention.startswith("retention: "), retention
    header, *rows = (line.split() for line in table)
    assert header == ["type", *(str(status) for status in Status)]
    return {row[0]: dict(zip(header[1:], map(int, row[1:]), strict=True)) for row in rows}


def test_stats(cli: Cli, queue: jobq.Queue, tmp_path: Path) -> None:
    make_history(queue, tmp_path)
    expected = {
        "append": {"completed": 1, "in_progress": 1, "pending": 1},
        "explode": {"failed": 1},
    }

    assert json.loads(cli.run("stats", "--json").ok().stdout) == expected

    zeros = {str(status): 0 for status in Status}
    table = parse_table(cli.run("stats").ok().stdout)
    assert table == {name: zeros | row for name, row in expected.items()}

    only = cli.run("stats", "--json", "--type", "explode").ok()
    assert json.loads(only.stdout) == {"explode": {"failed": 1}}
    from_env = cli.run("stats", "--json", env=base_env(JOBQ_TYPE="append")).ok()
    assert json.loads(from_env.stdout) == {"append": expected["append"]}


def test_stats_shows_the_retention_its_environment_sets(cli: Cli, queue: jobq.Queue) -> None:
    queue.install()
    assert cli.run("stats").ok().stdout.splitlines()[-1] == (
        "retention: completed and cancelled jobs kept 1d, failed and expired 7d; "
        "no finished job is kept"
    )
    queue.enqueue(AppendLine(os.devnull, "1"))
    assert queue.process_jobs(1) == 1
    env = base_env(JOBQ_RETAIN_COMPLETED="12h", JOBQ_RETAIN_FAILED="forever")
    last = cli.run("stats", env=env).ok().stdout.splitlines()[-1]
    assert re.fullmatch(
        r"retention: completed and cancelled jobs kept 12h, failed and expired forever; "
        r"the oldest finished job ended \d+s ago",
        last,
    ), last
    refused = cli.run("stats", "--retain-failed", "soon")
    assert refused.returncode == 2
    assert "--retain-failed: not a duration: 'soon'; give one like 90s" in refused.stderr


def test_stats_of_an_empty_queue(cli: Cli, queue: jobq.Queue) -> None:
    queue.install()
    assert json.loads(cli.run("stats", "--json").ok().stdout) == {}
    assert parse_table(cli.run("stats").ok().stdout) == {}


def test_prune_deletes_only_finished_jobs_older_than_asked(
    cli: Cli, queue: jobq.Queue, tmp_path: Path
) -> None:
    ids = make_history(queue, tmp_path)

    assert "deleted 0 finished job(s)" in cli.run("prune", "--older-than", "3600").ok().stdout
    assert sum(queue.counts().values()) == 4

    # The acknowledgements happened before this process started, so they are older than 0 s.
    assert "deleted 2 finished job(s)" in cli.run("prune", "--older-than", "0").ok().stdout
    assert queue.get(ids["completed"]) is None
    assert queue.get(ids["failed"]) is None
    assert status_of(queue, ids["in_progress"]) == (Status.IN_PROGRESS, 1)
    assert status_of(queue, ids["pending"]) == (Status.PENDING, 0)


def test_prune_deletes_only_the_statuses_asked(cli: Cli, queue: jobq.Queue, tmp_path: Path) -> None:
    ids = make_history(queue, tmp_path)

    only_failed = cli.run("prune", "--older-than", "0", "--status", "failed").ok()
    assert "deleted 1 finished job(s)" in only_failed.stdout
    assert queue.get(ids["failed"]) is None
    assert status_of(queue, ids["completed"])[0] == Status.COMPLETED

    both = cli.run("prune", "--older-than", "0", "--status", "expired", "--status", "completed")
    assert "deleted 1 finished job(s)" in both.ok().stdout
    assert queue.get(ids["completed"]) is None
    assert sum(queue.counts().values()) == 2


# -- environment variables -----------------------------------------------------------------


def test_environment_variables_stand_in_for_options(
    cli: Cli, dsn: str, queue: jobq.Queue, tmp_path: Path
) -> None:
    env = {"JOBQ_DSN": dsn, "JOBQ_APP": "jobs_app"}
    cli.run("migrate", env=base_env(**env), with_dsn=False).ok()
    out = tmp_path / "out"

    first = queue.enqueue(AppendLine(str(out), "first"))
    cli.run("work", "--max-jobs", "1", env=base_env(**env, JOBQ_LEASE="600"), with_dsn=False).ok()
    assert status_of(queue, first) == (Status.COMPLETED, 1)

    # A lease of a microsecond has ended before any job can start: the attempt is failed
    # without running, which shows the lease came from JOBQ_LEASE (and the app from JOBQ_APP,
    # since the job was decoded first).
    tiny = base_env(**env, JOBQ_LEASE="0.000001")
    second = queue.enqueue(AppendLine(str(out), "second"), retry=ONCE)
    cli.run("work", "--max-jobs", "1", env=tiny, with_dsn=False).ok()
    record = queue.get(second)
    assert record is not None
    assert (record.status, record.last_error) == (Status.FAILED, LEASE_EXPIRED_BEFORE_START)

    # An option beats its environment variable.
    third = queue.enqueue(AppendLine(str(out), "third"))
    cli.run("work", "--max-jobs", "1", "--lease", "600", env=tiny, with_dsn=False).ok()
    assert status_of(queue, third) == (Status.COMPLETED, 1)
    assert lines(out) == ["first", "third"]


# -- bad input -----------------------------------------------------------------------------


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize(
    ("args", "env", "returncode", "message"),
    [
        (["migrate", "--dsn", "foo://u:pw@host/db"], {}, 2, "unsupported DSN 'foo://u:***@"),
        (["migrate", "--dsn", "nonsense"], {}, 2, "unsupported DSN 'nonsense'"),
        (["work", "--app", "no_such_app_module"], {}, 2, "cannot import --app 'no_such_app"),
        (["work"], {"JOBQ_APP": "no_such_app_module"}, 2, "cannot import --app 'no_such_app"),
        (["work", "--lease", "0"], {}, 2, "argument --lease: must be a positive number"),
        (["work", "--lease", "-5"], {}, 2, "argument --lease: must be a positive number"),
        (["work", "--lease", "soon"], {}, 2, "argument --lease: not a number: 'soon'"),
        (["work", "--lease", "nan"], {}, 2, "argument --lease: must be a positive number"),
        (["work", "--lease", "1e12"], {}, 2, "argument --lease: must be at most 315360000 s"),
        (["work"], {"JOBQ_LEASE": "0"}, 2, "JOBQ_LEASE: must be a positive number"),
        (["work"], {"JOBQ_LEASE": "ten"}, 2, "JOBQ_LEASE: not a number: 'ten'"),
        (["work"], {"JOBQ_TYPE": ","}, 2, "JOBQ_TYPE: nothing but commas in ','"),
        (["work"], {"JOBQ_LOG_FORMAT": "xml"}, 2, "JOBQ_LOG_FORMAT: must be one of plain, json"),
        (["work"], {"JOBQ_LOG_LEVEL": "loud"}, 2, "JOBQ_LOG_LEVEL: must be one of DEBUG, INFO"),
        (["work", "--max-jobs", "-1"], {}, 2, "argument --max-jobs: must be a whole number of"),
        (["work", "--poll-interval", "0"], {}, 2, "argument --poll-interval"),
        (["work", "--type", ""], {}, 2, "argument --type: a job type must be"),
        (["work", "--type", "x" * 256], {}, 2, "argument --type: a job type must be"),
        (["work", "--log-level", "loud"], {}, 2, "argument --log-level: must be one of DEBUG"),
        (["prune", "--older-than", "-1"], {}, 2, "--older-than: must be at least 0 s, got -1"),
        (["prune", "--older-than", "1e12"], {}, 2, "argument --older-than"),
        (["prune", "--status", "pending"], {}, 2, "--status: must be one of completed, failed"),
        (["frobnicate"], {}, 2, "invalid choice: 'frobnicate'"),
    ],
)
def test_bad_input_is_refused_cleanly(
    cli: Cli, args: list[str], env: dict[str, str], returncode: int, message: str
) -> None:
    result = cli.run(*args, env=base_env(**env), with_dsn=False).refused(returncode)
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize(
    "dsn_with_password",
    [
        "mysql://u:s3cret@127.0.0.1:1/db",
        "mariadb://u:s3cret@127.0.0.1:1/db?connect_timeout=2",
        "mysql://u:s3cret@127.0.0.1:99999/db",
        "mysql://u:s3cret@127.0.0.1:1/db?connect_timeout=soon",
        "postgresql://u:s3cret@127.0.0.1:1/db",
        # libpq quotes a malformed password back in its error message.
        "postgresql://u:s3cret%zz@127.0.0.1:1/db",
        # An unencoded "@" in the password: refused, and the refusal shows no part of it.
        "mysql://u:s3c@ret@127.0.0.1:1/db",
        "postgresql://u:s3c@ret@127.0.0.1:1/db",
    ],
)
@pytest.mark.parametrize("via", ["option", "env"])
def test_connection_failures_are_reported_without_the_password(
    cli: Cli, dsn_with_password: str, via: str
) -> None:
    if via == "option":
        result = cli.run("stats", "--dsn", dsn_with_password, with_dsn=False)
    else:
        result = cli.run("stats", env=base_env(JOBQ_DSN=dsn_with_password), with_dsn=False)

    # 1 for a refused connection, 2 for a DSN that cannot even be parsed.
    result.refused(1, 2)
    assert "s3c" not in result.output
    assert "ret@" not in result.output
    assert result.stderr.startswith("jobq: ")
    assert "u:***@127.0.0.1" in result.stderr


@pytest.mark.parametrize("command", [["stats"], ["prune"], ["work", "--app", "jobs_app"]])
def test_commands_before_migrate_say_so_in_one_line(
    cli: Cli, db_kind: str, tmp_path: Path, command: list[str]
) -> None:
    result = cli.run(*command).refused(1)
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.endswith("run `jobq migrate` to create it\n")
    if db_kind == "sqlite":
        assert not list(tmp_path.glob("jobq.sqlite3*")), "an empty database file was created"


# -- stopping ------------------------------------------------------------------------------


@dataclass
class Worker:
    """A `jobq work` running in the background, its output going to files."""

    process: subprocess.Popen[bytes]
    stderr_path: Path

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def assert_running(self) -> bool:
        assert self.process.poll() is None, f"worker exited early:\n{self.stderr}"
        return True


@pytest.fixture
def start_worker(cli: Cli, tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def start(*args: str) -> Worker:
        stderr_path = tmp_path / f"worker-{len(started)}.stderr"
        with open(stderr_path, "wb") as stderr:
            process = subprocess.Popen(
                cli.command("work", "--dsn", cli.dsn, "--app", "jobs_app", *args),
                cwd=cli.cwd,
                env=base_env(),
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
            )
        worker = Worker(process, stderr_path)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        if worker.process.poll() is None:
            worker.process.kill()
        worker.process.wait(timeout=COMMAND_TIMEOUT)


def test_sigterm_lets_the_running_job_finish(
    queue: jobq.Queue, tmp_path: Path, start_worker: Callable[..., Worker]
) -> None:
    queue.install()
    started, release, done = (tmp_path / name for name in ("started", "release", "done"))
    slow = queue.enqueue(WaitForRelease(str(started), str(release), str(done)))
    after = queue.enqueue(AppendLine(str(tmp_path / "out"), "must not run"))

    worker = start_worker("--poll-interval", "0.1")
    wait_for("the job to start", lambda: started.exists() and worker.assert_running())
    worker.process.send_signal(signal.SIGTERM)
    # The job is held until the worker has seen the signal, so the stop request certainly
    # arrives while it runs.
    wait_for(
        "the worker to acknowledge SIGTERM",
        lambda: "Stopping after the current job (SIGTERM)" in worker.stderr,
    )
    assert worker.process.poll() is None
    assert status_of(queue, slow) == (Status.IN_PROGRESS, 1)
    release.touch()

    assert worker.process.wait(timeout=WAIT_TIMEOUT) == 0, worker.stderr
    assert done.exists()
    assert status_of(queue, slow) == (Status.COMPLETED, 1)
    assert status_of(queue, after) == (Status.PENDING, 0)
    assert "Traceback" not in worker.stderr


def test_sigint_stops_an_idle_worker(
    queue: jobq.Queue, tmp_path: Path, start_worker: Callable[..., Worker]
) -> None:
    queue.install()
    out = tmp_path / "out"
    queue.enqueue(AppendLine(str(out), "ran"))

    worker = start_worker("--poll-interval", "0.2")
    # Once a job has run, the worker has its signal handlers and is polling an empty queue.
    wait_for("the first job", lambda: lines(out) == ["ran"] and worker.assert_running())
    worker.process.send_signal(signal.SIGINT)

    assert worker.process.wait(timeout=WAIT_TIMEOUT) == 0, worker.stderr
    assert "Traceback" not in worker.stderr


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize(("scheme", "driver", "extra"), [
    ("postgresql", "psycopg", "postgresql"),
    ("mysql", "pymysql", "mysql"),
])  # fmt: skip
@pytest.mark.parametrize(("entry", "args"), [("commands", ["stats"]), ("supervise", [])])
def test_a_missing_driver_names_the_extra_to_install(
    tmp_path: Path, scheme: str, driver: str, extra: str, entry: str, args: list[str]
) -> None:
    argv = [*args, "--dsn", f"{scheme}://u:s3cret@127.0.0.1:1/db"]
    # None in sys.modules makes the import fail as if the package were not installed.
    code = (
        f"import sys; sys.modules[{driver!r}] = None; from jobq.cli import {entry}; "
        f"sys.exit({entry}.main({argv!r}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, cwd=tmp_path
    )
    assert result.returncode == 2, result.stderr
    assert f"pip install 'jobq[{extra}]'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "s3cret" not in result.stderr


@pytest.mark.databases("sqlite")
def test_the_supervisor_says_it_needs_linux_elsewhere(tmp_path: Path) -> None:
    code = (
        "import sys; from jobq.cli import supervise; sys.platform = 'darwin'; "
        "sys.exit(supervise.main([]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, cwd=tmp_path
    )
    assert result.returncode == 2
    assert result.stderr == (
        "jobq-supervise: needs Linux, not darwin; elsewhere run `jobq work`, which does not "
        "renew leases\n"
    )
    assert list(tmp_path.iterdir()) == [], "nothing is left behind"


# -- the first contact ---------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["show", "{job}"], ["jobs", "--limit", "300"]])
def test_a_stdout_closed_early_ends_the_command_quietly(
    cli: Cli, queue: jobq.Queue, tmp_path: Path, argv: list[str]
) -> None:
    """`jobq show 14 | head -6`: the reader may be gone before jobq writes, or before it has
    written all (300 rows are more than one buffer); here it is gone before the start."""
    queue.install()
    ids = queue.enqueue_many([AppendLine(str(tmp_path / "out"), "x") for _ in range(300)])
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            cli.command(*[arg.format(job=ids[0]) for arg in argv], "--dsn", cli.dsn),
            cwd=cli.cwd,
            env=base_env(),
            stdin=subprocess.DEVNULL,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=COMMAND_TIMEOUT,
        )
    finally:
        os.close(write)
    assert done.stderr == ""
    assert done.returncode == 141  # 128 + SIGPIPE, as a shell reports a tool the pipe ended


@pytest.mark.databases("sqlite")
def test_an_app_not_importable_from_the_working_directory_says_so(cli: Cli, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "myapp").mkdir(parents=True)
    (project / "myapp" / "__init__.py").write_text("")
    (project / "myapp" / "jobs.py").write_text("import no_such_dependency_of_myapp\n")

    result = cli.run("jobs", "--app", "myapp.jobs").refused(2)

    advice = (
        "cannot import --app 'myapp.jobs': no module named 'myapp' in the working "
        f"directory ({cli.cwd}) or on PYTHONPATH: run from the project's root, or set "
        "PYTHONPATH to it\n"
    )
    assert result.stderr == f"jobq: {advice}"
    supervised = subprocess.run(
        [sys.executable, "-m", "jobq.supervisor", "--dsn", cli.dsn, "--app", "myapp.jobs"],
        cwd=cli.cwd,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
    )
    assert supervised.returncode == 2
    assert supervised.stderr.endswith(f"jobq-supervise: {advice}")
    # Found, the application's own failed import is told as it is, without that advice.
    result = Cli(project, cli.dsn).run("jobs", "--app", "myapp.jobs").refused(2)
    assert result.stderr == (
        "jobq: cannot import --app 'myapp.jobs': No module named 'no_such_dependency_of_myapp'\n"
    )


def test_jobq_schedules_says_the_app_declares_none(cli: Cli) -> None:
    cli.run("migrate").ok()
    assert cli.run("schedules", "--app", "jobs_app").ok().stdout == (
        "jobq: --app 'jobs_app' declares no schedules\n"
    )
    assert cli.run("schedules").ok().stdout == (
        "jobq: no schedules are declared here: give --app, the module that declares them\n"
    )
    assert json.loads(cli.run("schedules", "--app", "jobs_app", "--json").ok().stdout) == []


@pytest.mark.databases("sqlite")
def test_the_status_page_says_the_app_declares_no_schedules(cli: Cli) -> None:
    cli.run("migrate").ok()
    pythonpath = base_env()["PYTHONPATH"]
    with jobq_web(cli.dsn, "--app", "jobs_app", cwd=cli.cwd, pythonpath=pythonpath) as address:
        status, html = http_get(address, "/schedules")
    assert status == 200
    assert "The application <code>jobs_app</code> declares no periodic jobs, and no" in html
    assert "give <code>--app</code>" not in html


@pytest.mark.databases("sqlite")
def test_the_status_page_redirects_a_doubled_slash_to_its_page(
    cli: Cli, queue: jobq.Queue, tmp_path: Path
) -> None:
    cli.run("migrate").ok()
    job_id = queue.enqueue(AppendLine(str(tmp_path / "out"), "x"))
    with jobq_web(cli.dsn, cwd=cli.cwd) as address:
        status, location = raw_get(address, f"/jobs//{job_id}?done=x")
        assert (status, location) == (308, f"/jobs/{job_id}?done=x")
        status, html = http_get(address, f"/jobs/{job_id}?done=x")
        assert status == 200
        assert f"<h1>Job {job_id} " in html
        # Doubled at the start, the path is the same page's to the router: it is served.
        status, html = http_get(address, "//jobs")
        assert status == 200
        assert "<h1>Jobs</h1>" in html


def raw_get(address: str, path: str) -> tuple[int, str | None]:
    """GET a path as given, not followed if redirected: the status and the Location."""
    host, port = address.removeprefix("http://").rstrip("/").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=COMMAND_TIMEOUT)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        return response.status, response.getheader("Location")
    finally:
        connection.close()


def http_get(address: str, path: str) -> tuple[int, str]:
    """GET a path of the server at `address` (http://host:port/): status and body."""
    try:
        url = address.rstrip("/") + path
        with urllib.request.urlopen(url, timeout=COMMAND_TIMEOUT) as got:
            return got.status, got.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
