"""`jobq demo lease`: one job longer than its lease, run without and then with lease renewal.

Phase a runs two plain `jobq work` processes, which never renew. The 8 s job outlives its 6 s
lease, so the idle worker's maintenance gives it out again while the first run goes on; neither
run can acknowledge it, and the job fails once its two attempts are spent. Phase b runs the
same job under jobq-supervise, whose master renews the lease every second: one run, accepted.

The demo watches from outside, as an operator would: the job journals its starts and ends to a
file, the workers' logs (as JSON, read by their `event` fields) say how each acknowledgement
went, and the database says how the job ended. The workers import this module as their --app,
so importing it must only register the job class.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import psutil

from .dsn import scrub
from .queue import LEASE_EXPIRED, Queue
from .records import JobRecord, Status
from .retry import RetryPolicy
from .testing.history import read_journal
from .testing.jobs import JournaledSleep

JOB_SECONDS = 8.0
LEASE = 6.0
MAX_ATTEMPTS = 2
# Zero backoff: the retry is ready the moment maintenance recovers the first attempt, so the
# second run starts while the first still runs.
POLICY = RetryPolicy(max_attempts=MAX_ATTEMPTS, backoff=0.0, jitter=False)
# A phase settles in 9 to 15 s; the bound only keeps a broken run from hanging.
PHASE_TIMEOUT = 40.0
POLL = 0.1
# How long a process gets after each stop request before the next, firmer one.
STOP_WAIT = 3.0
# Attempt 2 may start a little under a lease after attempt 1: each start is journaled a few
# milliseconds after its claim, and the two workers' claims are timed by the database.
START_SLACK = 0.5

SCENARIOS = ("lease",)
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
TERMINAL = (Status.COMPLETED, Status.FAILED, Status.EXPIRED)

# The demo's processes log one JSON object per line (logs.JsonFormatter); it reads these.
LOG_ARGS = ("--log-format", "json", "--log-level", "INFO")


class BuildReport(JournaledSleep):
    """Sleeps longer than the demo's lease, journaling each start and end."""

    job_name = "jobq.demo.BuildReport"
    type = "jobq-demo"  # the demo always enqueues under a type of its own run instead


def attempts_of(path: Path, job_id: int) -> list[dict[str, Any]]:
    return [entry for entry in read_journal(path) if entry["job"] == job_id]


# -- processes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    at: float  # time.monotonic() when the demo read it
    text: str

    def record(self) -> dict[str, Any] | None:
        """The log record on this line, if it is one of jobq's with an event."""
        if not self.text.startswith("{"):
            return None  # not a record: e.g. a warning Python printed
        with suppress(ValueError):
            record = json.loads(self.text)
            if isinstance(record, dict) and "event" in record:
                return record
        return None


class Started:
    """A process the demo started, its output read as it comes, each line timed on arrival."""

    def __init__(self, label: str, argv: Sequence[str], env: dict[str, str]) -> None:
        self.label = label
        self.popen = subprocess.Popen(
            list(argv),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        self.lines: list[Line] = []
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    @property
    def pid(self) -> int:
        return self.popen.pid

    def read(self) -> None:
        assert self.popen.stdout is not None
        for text in self.popen.stdout:
            self.lines.append(Line(time.monotonic(), text.rstrip("\n")))

    def running(self) -> bool:
        return self.popen.poll() is None

    def signal(self, signum: signal.Signals) -> None:
        if self.running():
            with suppress(ProcessLookupError):
                self.popen.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL it and whatever it forked: the last resort when stop requests failed."""
        if self.running():
            with suppress(psutil.Error):
                family = psutil.Process(self.pid).children(recursive=True)
                for process in family:
                    with suppress(psutil.Error):
                        process.kill()
            self.signal(signal.SIGKILL)
        with suppress(subprocess.TimeoutExpired):
            self.popen.wait(STOP_WAIT)
        self.reader.join(STOP_WAIT)


def wait_until_exited(processes: Sequence[Started], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for process in processes:
        with suppress(subprocess.TimeoutExpired):
            process.popen.wait(max(0.0, deadline - time.monotonic()))


def stop(processes: Sequence[Started]) -> None:
    """SIGTERM, then SIGTERM again, then SIGKILL, each after a bounded wait."""
    try:
        for _ in range(2):
            # The first request lets a plain worker finish its job and a supervisor drain;
            # a second one interrupts the job and stops a supervisor at once.
            for process in processes:
                process.signal(signal.SIGTERM)
            wait_until_exited(processes, STOP_WAIT)
    finally:
        # Also reached on a second Ctrl-C during the waits: nothing may be left running.
        for process in processes:
            process.kill()


def worker_env(dsn: str) -> dict[str, str]:
    """Our environment without any JOBQ_* setting, which would change the scenario (a
    JOBQ_LOG_LEVEL of WARNING alone would hide the lines the demo reads), and able to import
    the same jobq as this process."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("JOBQ_")}
    # In the environment, not on the command line, where `ps` would show its password to all.
    env["JOBQ_DSN"] = dsn
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


@contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt, so a terminated demo still stops its processes."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# -- watching a phase -----------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    at: float  # seconds since the phase began
    pid: int | None  # the process it happened in, when known
    kind: str  # start, end, accepted, refused, failed, exited
    attempt: int | None
    text: str


@dataclass
class Observed:
    """What one phase did to its job, as seen from outside the workers."""

    job_id: int
    events: list[Event]
    names: dict[int, str]
    record: JobRecord | None
    counts: dict[str, int]
    problem: str | None  # why the phase stopped before the job settled, if it did
    pids: list[int] = field(default_factory=list)

    def of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]

    def name(self, pid: int | None) -> str:
        if pid is None:
            return "--"
        return self.names.get(pid, f"pid {pid}")


class Watch:
    """Polls the journal, the logs and the database until the phase's job has settled."""

    def __init__(
        self,
        queue: Queue,
        job_id: int,
        journal: Path,
        processes: Sequence[Started],
        began: float,
        supervised: bool,
    ) -> None:
        self.queue = queue
        self.job_id = job_id
        self.journal = journal
        self.processes = processes
        self.began = began
        self.supervised = supervised
        self.record: JobRecord | None = None
        self.terminal_seen: float | None = None

    def records(self) -> list[tuple[float, dict[str, Any]]]:
        """Every log record of the phase's processes, with when it was read."""
        found = []
        for process in self.processes:
            for line in list(process.lines):
                record = line.record()
                if record is not None:
                    found.append((line.at, record))
        return sorted(found, key=lambda item: item[0])

    def events(self) -> list[Event]:
        events = []
        for entry in attempts_of(self.journal, self.job_id):
            attempt = int(str(entry["attempt"]))
            at = float(str(entry["mono"])) - self.began
            pid = int(str(entry["pid"]))
            if entry["event"] == "start":
                events.append(Event(at, pid, "start", attempt, f"started attempt {attempt}"))
            else:
                events.append(Event(at, pid, "end", attempt, f"attempt {attempt} ran to its end"))
        running = {e.pid for e in events if e.kind == "start"}
        for read, record in self.records():
            at, pid, event = read - self.began, record["pid"], record["event"]
            ours = record.get("job_id") == self.job_id
            if ours and event == "completed":
                attempt = record["attempt"]
                text = f"attempt {attempt} ended, ack accepted"
                events.append(Event(at, pid, "accepted", attempt, text))
            elif ours and event == "lost" and pid in running:
                # The worker's own record: its attempt no longer owned the job.
                attempt = record["attempt"]
                text = f"attempt {attempt} ended, ack refused: complete() returned False"
                events.append(Event(at, pid, "refused", attempt, text))
            elif event == "worker_exited" and record["worker"] in running:
                # Only the master logs this, about a worker that ran our job.
                text = f"worker exited ({record['exit']})"
                events.append(Event(at, record["worker"], "exited", None, text))
        if failed := self.failure():
            events.append(failed)
        return sorted(events, key=lambda e: e.at)

    def failure(self) -> Event | None:
        """The job's failure, if it failed other than by an attempt's own error: that is
        maintenance recovering its last attempt, which the worker that did it logs."""
        record, seen = self.record, self.terminal_seen
        if record is None or seen is None or record.status is not Status.FAILED:
            return None
        if record.last_error == LEASE_EXPIRED:
            text = (
                f"job failed: maintenance found attempt {record.attempts}'s lease over, "
                "with no attempt left"
            )
        else:
            # A traceback's last line holds the exception.
            text = "job failed: " + ((record.last_error or "").strip().splitlines() or [""])[-1]
        for read, entry in self.records():
            # Recovering the last attempt is what failed the job.
            last = (entry.get("job_id"), entry.get("attempt")) == (self.job_id, record.attempts)
            if entry["event"] == "recovered" and last:
                return Event(read - self.began, entry["pid"], "failed", None, text)
        return Event(seen - self.began, None, "failed", None, text)

    def names(self) -> dict[int, str]:
        """w1, w2… in the order the workers were started."""
        if self.supervised:
            pids = [r["worker"] for _, r in self.records() if r["event"] == "spawned"]
        else:
            pids = [process.pid for process in self.processes]
        return {pid: f"w{number}" for number, pid in enumerate(pids, 1)}

    def settled(self, events: list[Event]) -> bool:
        """The job is finished and every run of it has ended, with an ack or with its
        worker."""
        if self.record is None or self.record.status not in TERMINAL:
            return False
        starts = [e for e in events if e.kind == "start"]
        ended = {(e.pid, e.attempt) for e in events if e.kind in ("accepted", "refused")}
        gone = {e.pid for e in events if e.kind == "exited"}
        return bool(starts) and all((s.pid, s.attempt) in ended or s.pid in gone for s in starts)

    def wait(self, timeout: float) -> str | None:
        """Poll until the job settles; returns why it did not, or None."""
        deadline = self.began + timeout
        while True:
            self.record = self.queue.get(self.job_id)
            now = time.monotonic()
            if self.record is not None and self.record.status in TERMINAL:
                self.terminal_seen = self.terminal_seen or now
            if self.settled(self.events()):
                return None
            for process in self.processes:
                if not process.running():
                    return f"{process.label} exited early, code {process.popen.returncode}"
            if now >= deadline:
                status = self.record.status if self.record else "gone"
                return f"the job did not settle within {timeout:g} s (status {status})"
            time.sleep(POLL)

    def observe(self, problem: str | None) -> Observed:
        return Observed(
            job_id=self.job_id,
            events=self.events(),
            names=self.names(),
            record=self.queue.get(self.job_id),
            counts=self.queue.counts(self.record.type if self.record else None),
            problem=problem,
            pids=[process.pid for process in self.processes],
        )


# -- the scenario ---------------------------------------------------------------------------


class Checks:
    def __init__(self) -> None:
        self.passed = 0
        self.failed: list[str] = []

    def check(self, ok: bool, text: str) -> None:
        if ok:
            self.passed += 1
            print(f"  ok: {text}")
        else:
            self.failed.append(text)
            print(f"  FAIL: {text}")


def run_phase(
    queue: Queue,
    dsn: str,
    workdir: Path,
    job_type: str,
    argv: dict[str, Sequence[str]],
    supervised: bool,
) -> Observed:
    journal = workdir / f"{job_type}.journal"
    job_id = queue.enqueue(BuildReport(JOB_SECONDS, str(journal)), type=job_type, retry=POLICY)
    began = time.monotonic()
    processes: list[Started] = []
    try:
        env = worker_env(dsn)
        for label, command in argv.items():
            processes.append(Started(label, command, env))
        watch = Watch(queue, job_id, journal, processes, began, supervised)
        # What happened up to the moment the job settled: the shutdown is not part of it.
        observed = watch.observe(watch.wait(PHASE_TIMEOUT))
    finally:
        stop(processes)
    show(observed, supervised)
    if observed.problem:
        # Enough of each log to see what went wrong, on stderr, away from the report.
        for process in processes:
            print(f"  --- {process.label}, pid {process.pid}: last 30 lines ---", file=sys.stderr)
            for line in process.lines[-30:]:
                print(f"  {line.text}", file=sys.stderr)
    return observed


def show(observed: Observed, supervised: bool) -> None:
    workers = ", ".join(f"{name} = pid {pid}" for pid, name in observed.names.items())
    if supervised:
        print(f"  jobq-supervise pid {observed.pids[0]}, its workers {workers}")
    else:
        print(f"  workers {workers}")
    for event in observed.events:
        if event.kind != "end":  # the ack that follows says more
            print(f"  {event.at:5.1f} s  {observed.name(event.pid):<3} {event.text}")
    if observed.problem:
        print(f"  FAIL: {observed.problem}")


def check_unrenewed(observed: Observed, checks: Checks) -> None:
    starts = observed.of("start")
    ends = {e.attempt: e for e in observed.of("end")}
    checks.check(
        [e.attempt for e in starts] == [1, 2],
        f"two attempts started, 1 and 2 (saw {[e.attempt for e in starts]})",
    )
    if len(starts) < 2:
        # The same three checks, failed, so that every run reports the same number.
        checks.check(False, "attempt 2 went to the other worker")
        checks.check(False, f"attempt 2 started once the {LEASE:g} s lease had run out")
        checks.check(False, "both workers ran the job at the same time")
    else:
        first, second = starts[0], starts[1]
        checks.check(
            first.pid != second.pid,
            f"attempt 2 went to {observed.name(second.pid)}, not to "
            f"{observed.name(first.pid)}, which was still running attempt 1",
        )
        gap = second.at - first.at
        checks.check(
            gap >= LEASE - START_SLACK,
            f"attempt 2 started {gap:.1f} s after attempt 1: not before the {LEASE:g} s "
            "lease had run out",
        )
        end = ends.get(first.attempt)
        overlap = (end.at if end else float("inf")) - second.at
        checks.check(
            end is not None and overlap > 0,
            f"both workers ran the job at the same time for {overlap:.1f} s",
        )
    refused = sorted(e.attempt or 0 for e in observed.of("refused"))
    checks.check(
        refused == [1, 2] and not observed.of("accepted"),
        "no ack counted: complete() returned False to both attempts "
        f"(refused: {refused}, accepted: {len(observed.of('accepted'))})",
    )
    record = observed.record
    checks.check(
        record is not None
        and record.status is Status.FAILED
        and record.attempts == MAX_ATTEMPTS
        and not observed.of("accepted"),
        f"the job ended failed after {MAX_ATTEMPTS} attempts and never completed "
        f"(status {record.status if record else 'missing'}, "
        f"attempts {record.attempts if record else '-'})",
    )


def check_renewed(observed: Observed, checks: Checks) -> None:
    starts = observed.of("start")
    checks.check(
        [e.attempt for e in starts] == [1],
        f"one attempt started (saw {[e.attempt for e in starts]})",
    )
    ends = observed.of("end")
    took = ends[0].at - starts[0].at if starts and ends else 0.0
    checks.check(
        took > LEASE,
        f"it ran {took:.1f} s, past its {LEASE:g} s lease, kept by renewals",
    )
    checks.check(
        [e.attempt for e in observed.of("accepted")] == [1],
        "its ack was accepted",
    )
    checks.check(not observed.of("refused"), "no ack was refused")
    checks.check(
        observed.counts == {str(Status.COMPLETED): 1},
        f"the job is completed; none of its type is pending or in progress ({observed.counts})",
    )


def lease_scenario(dsn: str, workdir: Path) -> int:
    # A type of this run's own: the demo's workers claim nothing else, even in a shared database.
    run_type = f"jobq-demo-lease-{secrets.token_hex(4)}"
    checks = Checks()
    with Queue.connect(dsn, lease_duration=LEASE) as queue:
        queue.install()
        print(f"database: {scrub(dsn, dsn)}")

        print(
            f"\na) two `jobq work` workers, no renewal: a job of {JOB_SECONDS:g} s, "
            f"a lease of {LEASE:g} s, at most {MAX_ATTEMPTS} attempts"
        )
        job_type = f"{run_type}-a"
        work = [
            sys.executable, "-m", "jobq", "work", "--app", __name__, "--type", job_type,
            "--lease", f"{LEASE:g}", "--poll-interval", "0.2", *LOG_ARGS,
        ]  # fmt: skip
        observed = run_phase(
            queue, dsn, workdir, job_type, {"worker 1": work, "worker 2": work}, supervised=False
        )
        check_unrenewed(observed, checks)

        print("\nb) jobq-supervise --workers 2, renewing every 1 s: the same job and lease")
        job_type = f"{run_type}-b"
        supervise = [
            sys.executable, "-m", "jobq.supervisor", "--workers", "2", "--app", __name__,
            "--type", job_type, "--lease", f"{LEASE:g}", "--renew-interval", "1",
            "--renew-timeout", "1", "--kill-grace", "0", "--safety-margin", "1",
            "--poll-interval", "0.2", *LOG_ARGS,
        ]  # fmt: skip
        observed = run_phase(
            queue, dsn, workdir, job_type, {"jobq-supervise": supervise}, supervised=True
        )
        check_renewed(observed, checks)

    total = checks.passed + len(checks.failed)
    if checks.failed:
        print(f"\nFAIL: {len(checks.failed)} of {total} checks: {'; '.join(checks.failed)}")
        return 1
    print(f"\nPASS: {total} checks")
    return 0


def run_demo(scenario: str, dsn: str | None) -> int:
    """Run a scenario on `dsn`, or on a fresh SQLite file that is deleted afterwards."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown demo scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    workdir = Path(tempfile.mkdtemp(prefix="jobq-demo-"))
    try:
        with stop_on_sigterm():
            return lease_scenario(dsn or f"sqlite:///{workdir}/demo.sqlite3", workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
