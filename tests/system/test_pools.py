"""Several pools in one supervisor, with real processes on PostgreSQL: one scenario, played
once for the module, read by every test.

Pools: `hold:1` (long jobs, a backlog of three), `sleep:2` and `*:1` (every other type, one
of them named only at enqueue, which no job class declares). While the held jobs wait, the
other pools' jobs all complete; `ctl` resizes the sleep pool; a job of
the hold pool is stolen, so the master fences that pool's worker alone while the sleep pool
goes on; then the held jobs are released and the supervisor drains every pool."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest

import jobq
from jobq.records import Status
from jobq.testing.history import Report, check, read_journal
from jobq.testing.jobs import JournaledSleep
from tests.support.apps.supervised_app import Hold, Sleep
from tests.support.servers import ServerInfo, fresh_postgresql_database
from tests.support.supervising import (
    FAST,
    Scrape,
    Supervisor,
    events,
    metrics_port,
    scrape,
    supervisor,
)
from tests.support.waiting import wait_for

POOLS = ("--pool", "hold:1", "--pool", "sleep:2", "--pool", "*:1")
HOLDS, SLEEPS, OTHERS = 3, 8, 2
# A type given only at enqueue, as a Django Tasks queue name is: the * pool's too.
LOOSE = "loose"
SPAWNED = re.compile(r"Spawned worker (\d+) of pool (\S+)")


class Other(JournaledSleep):
    """A type no pool names: the * pool's."""

    job_name = "jobq.testing.JournaledSleep"


@dataclass
class Played:
    running: Supervisor
    held_meanwhile: dict[str, int]  # the hold pool's jobs when the others' had all completed
    others_done: list[dict[str, int]]
    titles: list[str]  # the workers' titles then
    busy: Scrape  # a scrape while the held job runs
    sizes: list[str]  # `ctl pools` after ttin, after ttou
    ctl_refused: subprocess.CompletedProcess[str]
    fenced: int  # the stolen job
    after_fence: dict[str, int]  # the sleep pool's jobs enqueued after the steal
    ended: Scrape  # after every job ended, before the drain
    reloaded: tuple[list[str], list[str]]  # pools of the workers a HUP retired, and spawned
    exit_code: int
    report: Report
    pool_of: dict[int, str]  # worker pid -> its pool
    pool_for: dict[int, str]  # job id -> the pool its type belongs to
    journal: list[dict[str, Any]]


def ctl(running: Supervisor, *words: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "jobq.supervisor", "ctl", *words, "--master"]
    return subprocess.run(
        [*command, str(running.pid)], capture_output=True, text=True, timeout=30, check=False
    )


def pool_titles(running: Supervisor, pool: str) -> list[str]:
    return [
        t for t in running.titles().values() if t.startswith(f"jobq-supervise: worker [{pool}]")
    ]


def resize(running: Supervisor, command: str, size: int) -> str:
    """`ctl COMMAND sleep`, then `ctl pools` once the sleep pool has `size` workers."""
    ctl(running, command, "sleep")
    wait_for(f"{size} sleep workers", lambda: len(pool_titles(running, "sleep")) == size)
    return ctl(running, "pools").stdout


def reload(running: Supervisor) -> tuple[list[str], list[str]]:
    """HUP, once every job ended: the pools of the workers it retired and of those it
    spawned, in order, once the last new one is ready."""
    running.signal(signal.SIGHUP)
    running.wait_for_log("(reload)", count=4, timeout=60)

    def new_workers() -> list[tuple[str, str]] | None:
        found: list[tuple[str, str]] = SPAWNED.findall(running.log.split("Reloading", 1)[1])
        return found if len(found) == 4 else None

    spawned = wait_for("4 new workers", new_workers)
    running.wait_for_log(f"Worker {spawned[-1][0]} ready")
    retired = re.findall(r"Retiring worker \d+ of pool (\S+) \(reload\)", running.log)
    return retired, [pool for _, pool in spawned]


@pytest.fixture(scope="module")
def played(
    postgresql_server: ServerInfo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Played]:
    workdir = tmp_path_factory.mktemp("pools")
    journal, release = workdir / "journal", workdir / "release"
    with (
        fresh_postgresql_database(postgresql_server) as dsn,
        jobq.Queue.connect(dsn, lease_duration=6) as queue,
    ):
        queue.install()
        holds = [queue.enqueue(Hold(str(journal), str(release))) for _ in range(HOLDS)]
        ids = holds + [queue.enqueue(Sleep(0.05, str(journal))) for _ in range(SLEEPS)]
        others_ids = [queue.enqueue(Other(0.05, str(journal))) for _ in range(OTHERS)]
        others_ids += [queue.enqueue(Other(0.05, str(journal)), type=LOOSE) for _ in range(OTHERS)]
        ids += others_ids
        with supervisor(dsn, *POOLS, *FAST, "--metrics-port", "0") as running:
            port = metrics_port(running)
            first = wait_for(
                "a held job to start",
                lambda: [e for e in events(journal, "start") if e["job"] in holds],
                30,
            )
            done = {"completed": SLEEPS + 2 * OTHERS}
            wait_for(
                f"the other pools' jobs to complete; log:\n{running.log}",
                lambda: {k: v for k, v in queue.counts().items() if k == "completed"} == done,
                30,
            )
            held = queue.counts(type="hold")
            others = [queue.counts(type=t) for t in ("sleep", "journaled-sleep", LOOSE)]
            # A worker's title follows its job within TITLE_REFRESH.
            titles = wait_for(
                "the held job in its worker's title",
                lambda: (
                    [t for t in running.titles().values() if "[hold] job" in t]
                    and list(running.titles().values())
                ),
            )
            wait_for(
                "the held job's worker counted busy",
                lambda: scrape(port).value("jobq_workers", pool="hold", state="busy") == 1,
            )
            busy = scrape(port)
            sizes = [resize(running, "ttin", 3), resize(running, "ttou", 2)]
            refused = ctl(running, "ttin", "nope")
            running.signal(signal.SIGTTIN)
            running.wait_for_log("TTIN/TTOU ignored")

            fenced = int(first[0]["job"])
            victim = int(first[0]["pid"])
            with psycopg.connect(dsn, autocommit=True) as connection:
                connection.execute("UPDATE jobq_jobs SET token = 'stolen' WHERE id = %s", (fenced,))
            running.wait_for_log(f"lost job {fenced} to another attempt")
            wait_for("the fenced worker gone", lambda: not psutil.pid_exists(victim))
            exits = {victim: time.monotonic()}
            later = [queue.enqueue(Sleep(0.05, str(journal))) for _ in range(SLEEPS)]
            wait_for(
                "the sleep pool's later jobs to complete",
                lambda: all(
                    (r := queue.get(i)) is not None and r.status is Status.COMPLETED for i in later
                ),
                30,
            )
            after = queue.counts(type="sleep")
            release.touch()
            total = {"completed": len(ids) + len(later)}
            wait_for(
                f"every job to complete; log:\n{running.log}", lambda: queue.counts() == total, 60
            )
            ended = scrape(port)
            reloaded = reload(running)
            running.signal(signal.SIGTERM)
            code = running.wait()
        records = [r for r in (queue.get(i) for i in ids + later) if r is not None]
        entries = read_journal(journal)
        pool_of = {int(pid): pool for pid, pool in SPAWNED.findall(running.log)}
        yield Played(
            running,
            held,
            others,
            titles,
            busy,
            sizes,
            refused,
            fenced,
            after,
            ended,
            reloaded,
            code,
            check(entries, records, exits),
            pool_of,
            {i: "hold" if i in holds else "*" if i in others_ids else "sleep" for i in ids + later},
            entries,
        )


def test_a_backlog_of_long_jobs_in_one_pool_leaves_the_other_pools_working(played: Played) -> None:
    # Every job of the other pools completed while the held job ran and two more waited.
    assert played.held_meanwhile == {"in_progress": 1, "pending": HOLDS - 1}
    assert played.others_done == [{"completed": SLEEPS}, *[{"completed": OTHERS}] * 2]


def test_each_type_runs_only_in_its_own_pool(played: Played) -> None:
    ran = {(int(e["job"]), played.pool_of[int(e["pid"])]) for e in played.journal}
    assert {pool for _, pool in ran} == {"hold", "sleep", "*"}
    assert sorted(pool for job, pool in ran if played.pool_for[job] != pool) == []


def test_titles_and_metrics_name_the_pool(played: Played) -> None:
    assert any(t.startswith("jobq-supervise: worker [hold] job ") for t in played.titles), (
        played.titles
    )
    assert any(t.startswith("jobq-supervise: worker [sleep] ") for t in played.titles)
    assert any(
        t.startswith("jobq-supervise: master [hold] 1/1 [sleep] 2/2 [*] 1/1 ")
        for t in played.titles
    )
    assert played.busy.value("jobq_workers", pool="sleep", state="busy") == 0
    assert played.busy.value("jobq_worker_slots", pool="hold", state="busy") == 1


def test_ctl_resizes_the_named_pool_only(played: Played) -> None:
    assert played.sizes == ["hold 1/1\nsleep 3/3\n* 1/1\n", "hold 1/1\nsleep 2/2\n* 1/1\n"]
    assert played.ctl_refused.returncode == 1
    assert played.ctl_refused.stderr == (
        "jobq-supervise ctl: no pool 'nope': the pools are 'hold', 'sleep', '*'\n"
    )


def test_a_fence_in_one_pool_stops_its_worker_alone(played: Played) -> None:
    killed = played.ended.values("jobq_workers_killed_total")
    assert {dict(k)["pool"] for k, v in killed.items() if v} == {"hold"}
    assert played.ended.value("jobq_workers_killed_total", pool="hold", reason="lost") == 1
    # The sleep pool's later jobs completed while the hold pool replaced its worker.
    assert played.after_fence == {"completed": 2 * SLEEPS}


def test_fences_and_drains_across_pools_keep_the_promise(played: Played) -> None:
    report = played.report
    assert played.exit_code == 0, played.running.log
    assert report.ok, report.summary()
    # The stolen job ran twice, every other once.
    assert report.attempts_run == report.attempts_counted == report.jobs + 1
    # TERM drained every pool's workers.
    drained = re.findall(r"Retiring worker \d+ of pool (\S+) \(drain\)", played.running.log)
    assert sorted(drained) == sorted(["hold", "sleep", "sleep", "*"])


def test_a_reload_replaces_each_pool_s_workers_pool_by_pool(played: Played) -> None:
    # One at a time, in the pools' order, each replaced in its own pool.
    order = ["hold", "sleep", "sleep", "*"]
    assert played.reloaded == (order, order)


def test_on_sqlite_the_star_pool_runs_a_type_given_only_at_enqueue(tmp_path: Path) -> None:
    journal, release = tmp_path / "journal", tmp_path / "release"
    dsn = f"sqlite:///{tmp_path}/jobq.sqlite3"
    with jobq.Queue.connect(dsn, lease_duration=6) as queue:
        queue.install()
        holds = [queue.enqueue(Hold(str(journal), str(release))) for _ in range(HOLDS)]
        loose = [queue.enqueue(Other(0.05, str(journal)), type=LOOSE) for _ in range(OTHERS)]
        # A concurrent worker for *, where the PostgreSQL scenario's is a process worker.
        with supervisor(dsn, "--pool", "hold:1", "--pool", "*:1:2", *FAST) as running:
            wait_for("a held job to start", lambda: events(journal, "start", holds[0]), 30)
            wait_for(
                f"the loose jobs to complete; log:\n{running.log}",
                lambda: queue.counts(type=LOOSE) == {"completed": OTHERS},
                30,
            )
            held = queue.counts(type="hold")
            release.touch()
            total = {"completed": HOLDS + OTHERS}
            wait_for(f"every job to complete; log:\n{running.log}", lambda: queue.counts() == total)
            running.signal(signal.SIGTERM)
            assert running.wait() == 0, running.log
        ran = {int(e["job"]): e["pid"] for e in events(journal, "start")}
    assert held == {"in_progress": 1, "pending": HOLDS - 1}
    # Each pool's jobs ran in its own worker.
    assert len({ran[i] for i in holds}) == 1
    assert not {ran[i] for i in holds} & {ran[i] for i in loose}
