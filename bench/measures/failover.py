"""A PostgreSQL failover under load, on synchronous and on asynchronous replication: how many
jobs ran twice, overlapped or were lost (issue 33).

    python -m bench.measures.failover                 # about 3 minutes on 2 cores
    python -m bench.measures.failover --jobs 120 --lag 0,3

Each run starts a primary and a streaming standby on loopback (tests/support/replication.py),
the standby streaming through a TCP proxy. A supervisor (4 workers, the tests' 6 s lease)
drains jobs of mixed lengths that journal every attempt. Once a quarter of them completed,
the proxy stops passing replication for `lag` seconds (a standby falling behind, as over a
slow link), then the primary is stopped as a crash would (`-m immediate`) and the standby
promoted. On synchronous replication the primary's commits wait for the standby, so work
stalls during the lag; on asynchronous replication it goes on, and what it committed then
is missing on the new primary. The history checker then reads the journal and the jobs.

Prints one line per run and a Markdown table; writes nothing, asserts nothing. Everything
it started is stopped when it returns, each wait bounded.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import signal
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from chaos.observe import Deaths, Observer
from jobq.testing.history import check, read_journal
from tests.support.faults import (
    SETTINGS,
    all_completed,
    completed,
    enqueue,
    mixed_lengths,
    records_of,
)
from tests.support.proxy import Proxy
from tests.support.replication import connect, replicated_postgresql
from tests.support.supervising import supervisor
from tests.support.waiting import wait_for

DRAIN_TIMEOUT = 120.0


@dataclass
class Run:
    replication: str
    lag: float
    jobs: int
    drained: bool
    ran_twice: int  # jobs whose handle() ran to its end more than once
    overlaps: int  # pairs of attempts of one job that ran at the same time
    lost: int  # jobs that never completed
    missing: int  # completions the primary had at the crash and the promoted standby lacked
    attempts: int  # attempts journalled

    def line(self) -> str:
        drained = "yes" if self.drained else "no"
        return (
            f"| {self.replication} | {self.lag:g} s | {self.jobs} | {self.attempts} | "
            f"{self.missing} | {self.ran_twice} | {self.overlaps} | {self.lost} | {drained} |"
        )


def completions(port: int, dsn: str) -> int:
    """Jobs completed, as the server on `port` has them."""
    dbname = dsn.rsplit("/", 1)[1].split("?")[0]
    with connect(port, dbname) as server:
        row = server.execute("SELECT count(*) FROM jobq_jobs WHERE status = 'completed'")
        found = row.fetchone()
        assert found is not None
        return int(str(found[0]))


def run(synchronous: bool, lag: float, jobs: int, seed: int) -> Run:
    base = Path(tempfile.mkdtemp(prefix="jobq-bench-failover-"))
    journal = base / "journal"
    drained = False
    with contextlib.ExitStack() as stack:
        proxies: list[Proxy] = []

        def relay(port: int) -> int:
            proxies.append(stack.enter_context(Proxy(("127.0.0.1", port))))
            return proxies[-1].port

        pair = stack.enter_context(replicated_postgresql(synchronous, relay))
        dsn = pair.create_database()
        ids = enqueue(dsn, mixed_lengths(jobs, random.Random(seed)), journal)
        observer = Observer(dsn)
        stack.callback(observer.close)
        deaths = stack.enter_context(Deaths())
        running = stack.enter_context(supervisor(dsn, "--workers", "4", *SETTINGS))
        deaths.family(running.pid)
        wait_for("a quarter of the jobs", lambda: completed(observer) >= jobs // 4, 60)
        proxies[0].blackhole()
        time.sleep(lag)  # the lag is the measured condition, not a wait for an event
        before = completions(pair.ports[0], dsn)
        pair.crash_primary()
        proxies[0].close()
        pair.promote()
        missing = before - completions(pair.ports[1], dsn)
        with contextlib.suppress(TimeoutError, AssertionError, RuntimeError):
            wait_for("the drain", lambda: all_completed(observer, jobs), DRAIN_TIMEOUT)
            drained = True
        running.signal(signal.SIGTERM)
        running.wait(30)
        records = records_of(observer, ids)
    entries = read_journal(journal)
    report = check(entries, records, deaths.exits_for(entries))
    ends = Counter(entry["job"] for entry in entries if entry["event"] == "end")
    shutil.rmtree(base, ignore_errors=True)
    return Run(
        "synchronous" if synchronous else "asynchronous",
        lag,
        jobs,
        drained,
        sum(1 for count in ends.values() if count > 1),
        len(report.overlaps),
        len(report.lost),
        missing,
        sum(1 for entry in entries if entry["event"] == "start"),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.measures.failover")
    parser.add_argument("--jobs", type=int, default=120, help="jobs per run (120)")
    parser.add_argument(
        "--lag", default="0,3", help="seconds the standby falls behind before the crash (0,3)"
    )
    parser.add_argument("--seed", type=int, default=33)
    args = parser.parse_args(argv)
    lags = [float(x) for x in args.lag.split(",")]
    runs = []
    for synchronous in (True, False):
        for lag in lags:
            result = run(synchronous, lag, args.jobs, args.seed)
            print(result.line(), flush=True)
            runs.append(result)
    print(
        "\n| replication | lag | jobs | attempts | completions missing after the promotion "
        "| ran twice | overlaps | lost | drained |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for result in runs:
        print(result.line())


if __name__ == "__main__":
    main()
