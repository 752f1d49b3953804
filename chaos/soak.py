"""The soak: thousands of jobs through supervisors on a private PostgreSQL while faults are
injected at random, then the history checker.

    python -m chaos [--jobs 10000] [--seconds 600] [--seed N] [--keep]

Jobs of mixed lengths (most a few milliseconds, some seconds, a few longer than two leases),
a tenth of them doing their work in a subprocess that journals too, are produced at a steady
pace over the first part of the run, through supervisors with the tests' FAST renewal
settings (a 6 s lease), while faults are injected one at a time (faults.py: workers,
masters and their helpers killed, masters stopped, logs stalled, the database link
blackholed or slowed, the server restarted). Then the faults stop, everything drains,
maintenance runs, and the checker reads the journal and the jobs table (report.py prints
what it found).

Prints jobs, attempts, faults injected by kind, overlaps and lost jobs; exits 1 on any
overlap, lost job, run that did not drain, or supervisor that did not keep running, else 0.
The server, the proxy and every process started are gone when it returns.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import jobq
from jobq.testing.history import Report, check, read_journal
from tests.support.apps.chaos_app import (
    Chaos,
    ChaosAsync,
    ChaosSubprocess,
    ChaosSubprocessAsync,
    ChaosToThread,
)
from tests.support.proxy import Proxy, address_of, proxied_dsn
from tests.support.servers import PostgresqlServer, fresh_postgresql_database, started_postgresql
from tests.support.supervising import FAST, Supervisor

from .faults import Faults
from .observe import DATABASE_ERRORS, Deaths, Observer
from .plan import (
    BATCH,
    CONCURRENCY,
    COROUTINE_SHARE,
    DRAIN_GRACE,
    JOB_TIMEOUT,
    LONGEST,
    SUBPROCESS_SHARE,
    SUPERVISORS,
    WORKERS,
    Options,
    lengths,
    parse,
)
from .report import Outcome, print_report

# Seconds a supervisor the soak starts may take to say it started (imports, the schema check).
STARTED_WITHIN = 60.0


def kind_of(draw: float) -> type[Chaos]:
    """A job's kind from a draw in [0, 1): a subprocess's (from a thread or a coroutine), a
    coroutine (that may hand its work to a thread) or a thread."""
    if draw < SUBPROCESS_SHARE:
        return ChaosSubprocess if draw < SUBPROCESS_SHARE / 2 else ChaosSubprocessAsync
    if draw < SUBPROCESS_SHARE + COROUTINE_SHARE / 3:
        return ChaosToThread
    return ChaosAsync if draw < SUBPROCESS_SHARE + COROUTINE_SHARE else Chaos


@dataclass
class Running:
    supervisor: Supervisor
    name: str
    killed: bool = False  # by the soak: its exit is no failure
    stopped: bool = False


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
            Faults(self).inject()
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
        jobs = [kind_of(kinds.random())(seconds, str(self.journal)) for seconds in self.lengths]
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
        args = ["--workers", str(WORKERS), "--concurrency", str(CONCURRENCY)]
        args += ["--app", "chaos_app", *FAST, "--job-timeout", f"{JOB_TIMEOUT:g}"]
        supervisor = Supervisor(proxied_dsn(self.dsn, self.proxy), args)
        running = Running(supervisor, name)
        self.supervisors.append(running)
        self.deaths.family(supervisor.pid)
        # Faults wait for its start (this thread injects them): a supervisor that never
        # reached the database takes a worker that cannot connect for a bad DSN and stops,
        # as it should, and a fault in its first second made the soak call that a problem.
        supervisor.wait_for_log("jobq-supervise started", timeout=STARTED_WITHIN)
        return running

    def live(self) -> list[Running]:
        return [r for r in self.supervisors if not r.killed]

    def check_supervisors(self) -> None:
        """A supervisor the soak did not kill must keep running, whatever the faults."""
        for running in self.live():
            code = running.supervisor.process.poll()
            if code is not None:
                running.killed = True  # reported once
                self.problem(f"{running.name} exited on its own with {code}")
                self.start_supervisor()

    def problem(self, text: str) -> None:
        self.problems.append(text)
        self.say(f"PROBLEM: {text}")

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
    options = parse(argv, __doc__.split("\n")[0])
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
