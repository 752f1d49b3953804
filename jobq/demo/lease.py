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

import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ..dsn import scrub
from ..queue import Queue
from ..records import Status
from ..retry import RetryPolicy
from ..testing.jobs import JournaledSleep
from .processes import Started, stop, stop_on_sigterm, worker_env
from .watch import Observed, Watch

JOB_SECONDS = 8.0
LEASE = 6.0
MAX_ATTEMPTS = 2
# Zero backoff: the retry is ready the moment maintenance recovers the first attempt, so the
# second run starts while the first still runs.
POLICY = RetryPolicy(max_attempts=MAX_ATTEMPTS, backoff=0.0, jitter=False)
# A phase settles in 9 to 15 s; the bound only keeps a broken run from hanging.
PHASE_TIMEOUT = 40.0
# Attempt 2 may start a little under a lease after attempt 1: each start is journaled a few
# milliseconds after its claim, and the two workers' claims are timed by the database.
START_SLACK = 0.5

SCENARIOS = ("lease",)

# The demo's processes log one JSON object per line (logs.JsonFormatter); it reads these.
LOG_ARGS = ("--log-format", "json", "--log-level", "INFO")


class BuildReport(JournaledSleep):
    """Sleeps longer than the demo's lease, journaling each start and end."""

    job_name = "jobq.demo.BuildReport"
    type = "jobq-demo"  # the demo always enqueues under a type of its own run instead


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


# The attempt whose renewal stops, and the one that follows once its lease runs out.
BOTH_ATTEMPTS = (1, 2)


def check_unrenewed(observed: Observed, checks: Checks) -> None:
    starts = observed.of("start")
    ends = {e.attempt: e for e in observed.of("end")}
    checks.check(
        [e.attempt for e in starts] == list(BOTH_ATTEMPTS),
        f"two attempts started, 1 and 2 (saw {[e.attempt for e in starts]})",
    )
    if len(starts) < len(BOTH_ATTEMPTS):
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
