"""The soak: thousands of jobs through supervisors on a private PostgreSQL while faults are
injected at random, then the history checker.

    python -m chaos [--jobs 10000] [--seconds 600] [--seed N] [--keep]

Jobs of mixed lengths (most a few milliseconds, some seconds, a few longer than two leases),
a tenth of them doing their work in a subprocess that journals too, are produced at a steady
pace over the first part of the run, through supervisors with the tests' FAST renewal
settings (a 6 s lease). Faults, one at a time, kinds at random (a first
round takes every kind once): SIGKILL of a busy worker; SIGKILL of a master, with a
replacement supervisor started; SIGSTOP of a master, SIGCONT seconds later; the database
link (every supervisor reaches PostgreSQL through a TCP proxy) blackholed or slowed; the
database server restarted. Then the faults stop, everything drains, maintenance runs, and
the checker reads the journal and the jobs table.

Prints jobs, attempts, faults injected by kind, overlaps and lost jobs; exits 1 on any
overlap, lost job, run that did not drain, or supervisor that did not keep running, else 0.
The server, the proxy and every process started are gone when it returns.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import jobq
from jobq.testing.history import Report, check, read_journal
from tests.support.apps.chaos_app import Chaos, ChaosSubprocess
from tests.support.proxy import Proxy, address_of, proxied_dsn
from tests.support.servers import PostgresqlServer, fresh_postgresql_database, started_postgresql
from tests.support.supervising import FAST, Supervisor

from .observe import DATABASE_ERRORS, Deaths, Observer, busy_workers

WORKERS = 4
SUPERVISORS = 2
# The longest job; the drain must leave room for one started at the last moment to be
# killed, wait out its lease and run again.
LONGEST = 19.0
LEASE = 6.0
# Past the nominal --seconds, how long a run that has not drained yet may go on draining.
DRAIN_GRACE = 2 * LONGEST
# This share of the jobs does its work in a subprocess, which must die with its attempt.
SUBPROCESS_SHARE = 0.1
# Jobs are enqueued this many to a transaction.
BATCH = 20

KINDS = ("kill_worker", "kill_master", "stop_master", "blackhole", "slow", "db_restart")
WEIGHTS = (35, 10, 15, 15, 15, 10)


@dataclass
class Options:
    jobs: int
    seconds: float
    seed: int
    keep: bool


def parse(argv: list[str] | None) -> Options:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs to run (default 10000)")
    parser.add_argument(
        "--seconds", type=float, default=600.0, help="nominal length of the run (default 600)"
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    parser.add_argument("--keep", action="store_true", help="keep the logs and journal")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.seconds < 30:
        parser.error("--jobs must be at least 1 and --seconds at least 30")
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    return Options(args.jobs, args.seconds, seed, args.keep)


def lengths(count: int, rng: random.Random) -> list[float]:
    """Most jobs a few milliseconds; 3 % up to 2 s; 0.5 % longer than two leases, in the
    first half of the run so that they can finish."""
    found = []
    for i in range(count):
        draw = rng.random()
        if draw < 0.005 and i < count / 2:
            found.append(rng.uniform(13.0, LONGEST))
        elif draw < 0.035:
            found.append(rng.uniform(0.3, 2.0))
        else:
            found.append(rng.uniform(0.0, 0.02))
    if not any(length > 2 * LEASE for length in found):
        found[count // 10] = 15.0
    return found


@dataclass
class Running:
    supervisor: Supervisor
    name: str
    killed: bool = False  # by the soak: its exit is no failure
    stopped: bool = False


@dataclass
class Outcome:
    report: Report | None = None
    drained: bool = False
    problems: list[str] = field(default_factory=list)


class Soak:
    def __init__(
        self, options: Options, server: PostgresqlServer, proxy: Proxy, dsn: str, workdir: Path
    ) -> None:
        self.options = options
        self.proxy = proxy
        # The faults' draws and the jobs' are separate streams, so a seed replays both.
        self.rng = random.Random(f"faults {options.seed}")
        self.lengths = lengths(options.jobs, random.Random(f"jobs {options.seed}"))
        self.server = server
        self.dsn = dsn
        self.workdir = workdir
        self.journal = workdir / "journal"
        self.started = time.monotonic()
        # Faults and production end early enough for what was hit last to finish.
        self.faults_end = self.started + max(options.seconds / 2, options.seconds - 2 * LONGEST)
        self.drain_end = self.started + options.seconds + DRAIN_GRACE
        self.faults: Counter[str] = Counter()
        self.supervisors: list[Running] = []
        self.deaths = Deaths()
        self.observer = Observer(dsn)
        self.produced = threading.Event()  # every job is in the table
        self.stopping = threading.Event()  # the run is being torn down
        self.problems: list[str] = []

    # -- the run ---------------------------------------------------------------------------

    def run(self) -> Outcome:
        with jobq.Queue.connect(self.dsn) as queue:
            queue.install()
        producer = threading.Thread(target=self.produce, name="producer", daemon=True)
        producer.start()
        try:
            for _ in range(SUPERVISORS):
                self.start_supervisor()
            self.inject_faults()
            drained = self.drain()
            producer.join(5)
            self.stop_supervisors()
            return Outcome(self.judge(), drained, self.problems)
        finally:
            self.stopping.set()
            for running in self.supervisors:
                with contextlib.suppress(ProcessLookupError):
                    running.supervisor.signal(signal.SIGCONT)
                running.supervisor.stop()
            self.deaths.close()
            self.observer.close()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def say(self, text: str, at: float | None = None) -> None:
        print(f"{self.elapsed() if at is None else at:7.1f} s  {text}", flush=True)

    def produce(self) -> None:
        """Enqueue every job at a steady pace over the fault phase, in small transactions,
        reconnecting (and resending the batch) when the database goes away."""
        kinds = random.Random(f"kinds {self.options.seed}")
        jobs = [
            (ChaosSubprocess if kinds.random() < SUBPROCESS_SHARE else Chaos)(
                seconds, str(self.journal)
            )
            for seconds in self.lengths
        ]
        window = (self.faults_end - self.started) * 0.9
        queue: jobq.Queue | None = None
        for first in range(0, len(jobs), BATCH):
            due = self.started + window * first / len(jobs)
            if self.stopping.wait(max(0.0, due - time.monotonic())):
                return
            while not self.stopping.is_set():
                try:
                    if queue is None:
                        queue = jobq.Queue.connect(self.dsn)
                    connection = queue.connection
                    with connection.transaction():
                        for job in jobs[first : first + BATCH]:
                            queue.enqueue(job, connection=connection)
                    break
                except DATABASE_ERRORS:
                    # A batch whose commit landed but whose reply was lost is sent twice:
                    # more jobs, each of which must still run. The checker counts rows.
                    with contextlib.suppress(*DATABASE_ERRORS):
                        if queue is not None:
                            queue.close()
                    queue = None
                    self.stopping.wait(0.5)
        if queue is not None:
            queue.close()
        self.produced.set()

    def start_supervisor(self) -> Running:
        name = f"supervisor-{len(self.supervisors) + 1}"
        args = ("--workers", str(WORKERS), "--app", "chaos_app", *FAST)
        supervisor = Supervisor(proxied_dsn(self.dsn, self.proxy), args)
        running = Running(supervisor, name)
        self.supervisors.append(running)
        self.deaths.family(supervisor.pid)
        return running

    def live(self) -> list[Running]:
        return [r for r in self.supervisors if not r.killed]

    def check_supervisors(self) -> None:
        """A supervisor the soak did not kill must keep running, whatever the faults."""
        for running in self.live():
            code = running.supervisor.process.poll()
            if code is not None:
                running.killed = True  # reported once
                self.problems.append(f"{running.name} exited on its own with {code}")
                self.say(f"PROBLEM: {running.name} exited on its own with {code}")
                self.start_supervisor()

    # -- faults ----------------------------------------------------------------------------

    def inject_faults(self) -> None:
        first_round = list(KINDS)
        self.rng.shuffle(first_round)
        while time.monotonic() < self.faults_end:
            self.check_supervisors()
            kind = first_round.pop() if first_round else self.rng.choices(KINDS, WEIGHTS)[0]
            fault: Callable[[], str | None] = getattr(self, kind)
            began = self.elapsed()
            what = fault()
            if what is not None:
                self.faults[kind] += 1
                self.say(f"{kind}: {what}", began)
            self.pause(self.rng.uniform(0.5, 2.5))
        self.check_supervisors()

    def pause(self, seconds: float) -> None:
        """How long a fault lasts, or the gap between two: not a wait for anything."""
        time.sleep(max(0.0, min(seconds, self.faults_end + LEASE - time.monotonic())))

    def kill_worker(self) -> str | None:
        candidates = [
            (running, pid, job)
            for running in self.live()
            if not running.stopped
            for pid, job in busy_workers(running.supervisor.pid).items()
        ]
        if not candidates:
            return None
        running, pid, job = self.rng.choice(candidates)
        if not self.deaths.kill(pid):
            return None
        return f"worker {pid} of {running.name}, holding job {job}"

    def kill_master(self) -> str | None:
        running = self.rng.choice(self.live())
        self.deaths.refresh()  # its newest children too, before they die with it
        running.supervisor.signal(signal.SIGKILL)
        running.killed = True
        replacement = self.start_supervisor()
        return f"{running.name} (pid {running.supervisor.pid}), replaced by {replacement.name}"

    def stop_master(self) -> str | None:
        running = self.rng.choice(self.live())
        seconds = self.rng.uniform(1.0, 8.0)
        running.supervisor.signal(signal.SIGSTOP)
        running.stopped = True
        try:
            self.pause(seconds)
        finally:
            running.supervisor.signal(signal.SIGCONT)
            running.stopped = False
        return f"{running.name} stopped for {seconds:.1f} s"

    def blackhole(self) -> str | None:
        seconds = self.rng.uniform(1.0, 7.0)
        self.proxy.blackhole()
        try:
            self.pause(seconds)
        finally:
            self.proxy.restore()
        return f"database link blackholed for {seconds:.1f} s"

    def slow(self) -> str | None:
        # 1.5 s each way is past the 1 s renewal timeout; 0.3 s is slow but in time.
        latency = self.rng.choice([300, 1500])
        seconds = self.rng.uniform(2.0, 6.0)
        self.proxy.delay(latency)
        try:
            self.pause(seconds)
        finally:
            self.proxy.restore()
        return f"database link slowed by {latency} ms each way for {seconds:.1f} s"

    def db_restart(self) -> str | None:
        down = self.rng.uniform(0.0, 2.0)
        self.server.stop()
        try:
            self.pause(down)
        finally:
            self.server.start()
        return f"PostgreSQL restarted, down {down:.1f} s"

    # -- the end ---------------------------------------------------------------------------

    def drain(self) -> bool:
        """Wait (bounded) for every job to be produced and settled."""
        self.say("faults over: draining")
        while time.monotonic() < self.drain_end:
            self.check_supervisors()
            counts = self.observer.counts()
            waiting = None if counts is None else counts.get("pending", 0)
            running = None if counts is None else counts.get("in_progress", 0)
            if self.produced.is_set() and waiting == 0 and running == 0:
                self.say(f"drained: {counts}")
                return True
            time.sleep(0.5)
        self.say(f"NOT drained in time: {self.observer.counts()}")
        return False

    def stop_supervisors(self) -> None:
        for running in self.live():
            running.supervisor.signal(signal.SIGTERM)
        for running in self.live():
            try:
                code = running.supervisor.wait(60)
            except Exception as error:
                code = None
                self.problems.append(f"{running.name} did not stop on SIGTERM: {error}")
            if code not in (0, None):
                self.problems.append(f"{running.name} exited with {code} after SIGTERM")
        for running in self.supervisors:
            log = self.workdir / f"{running.name}.log"
            log.write_text(running.supervisor.log + "\n")

    def judge(self) -> Report:
        """Maintenance, then the checker over the journal and every row of the table."""
        queue = jobq.Queue.connect(self.dsn)
        with queue:
            queue.run_maintenance()
            ids = [int(row[0]) for row in queue.backend.fetchall("SELECT id FROM jobq_jobs")]
            records = [record for i in ids if (record := queue.get(i)) is not None]
        entries = read_journal(self.journal)
        return check(entries, records, self.deaths.exits_for(entries))

    def refused_acks(self) -> int:
        return sum(
            running.supervisor.log.count("Job ownership lost before")
            for running in self.supervisors
        )


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    workdir = Path(tempfile.mkdtemp(prefix="jobq-chaos-"))
    print(
        f"jobq soak: {options.jobs} jobs, about {options.seconds:g} s, seed {options.seed}, "
        f"workdir {workdir}",
        flush=True,
    )
    with (
        started_postgresql() as server,
        fresh_postgresql_database(server.info) as dsn,
        Proxy(address_of(dsn)) as proxy,
    ):
        soak = Soak(options, server, proxy, dsn, workdir)
        outcome = soak.run()
    ok = print_report(soak, outcome)
    if ok and not options.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"logs and journal kept in {workdir}")
    return 0 if ok else 1


def print_report(soak: Soak, outcome: Outcome) -> bool:
    report = outcome.report
    assert report is not None
    faults = ", ".join(f"{kind} {soak.faults[kind]}" for kind in KINDS)
    print()
    print(f"jobs: {report.jobs}")
    print(f"attempts: {report.attempts_run} run, {report.attempts_counted} counted by the database")
    print(f"killed mid-attempt: {len(report.unfinished)}")
    print(f"acknowledgements refused: {soak.refused_acks()}")
    print(f"final statuses: {dict(sorted(report.statuses.items()))}")
    print(f"faults injected: {sum(soak.faults.values())} ({faults})")
    print(f"overlaps: {len(report.overlaps)}")
    print(f"lost: {len(report.lost)}")
    for line in report.summary().splitlines():
        if line.startswith("  "):
            print(line)
    ok = report.ok and outcome.drained and not outcome.problems
    if not outcome.drained:
        print("FAILED: the run did not drain in its time")
    for problem in outcome.problems:
        print(f"FAILED: {problem}")
    print("OK" if ok else "FAILED")
    return ok
