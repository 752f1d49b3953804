"""No two attempts of one job overlap, counting every process an attempt started: whatever
ends an attempt early, and whatever kind of work its job does.

Each kind of job (supervised_app.Attempted) journals its start and end from every process it
works in: the worker, a subprocess it waits on, a double-forked setsid daemon, or the worker
holding its GIL in C calls. Attempt 1 is cut short by one path; attempt 2 then runs and
completes. chaos.observe.Deaths watches the supervisors' every process (daemons included,
reparented to the master), so a process killed before it journaled its end ended when it
was seen gone, and the history checker judges the whole run.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

import jobq
from jobq.testing.history import read_journal
from tests.support.apps.supervised_app import Alarm, Attempted, CutConnection
from tests.support.attempts import KINDS, LEASE, RETRY, Case, enqueued, stop
from tests.support.proxy import Proxy, address_of, proxied_dsn
from tests.support.supervising import FAST, Supervisor, metrics_port, scrape, supervisor
from tests.support.waiting import wait_for

pytestmark = pytest.mark.lease(LEASE)


# -- the paths that end an attempt early ----------------------------------------------------


def job_timeout(case: Case, kind: str) -> None:
    with case.supervise("--job-timeout", "2") as running:
        case.first_attempt_started(running, kind)
        case.wait_completed(running)
        assert "ran past --job-timeout" in running.log
        stop(running)


def frozen_master(case: Case, kind: str) -> None:
    with case.supervise("--metrics-port", "0") as running:
        port = metrics_port(running)
        pids = case.first_attempt_started(running, kind)
        running.signal(signal.SIGSTOP)
        try:
            case.wait_gone(pids, LEASE + 2, running)
        finally:
            running.signal(signal.SIGCONT)
        running.wait_for_log(f"Lease of job {case.job_id} was not renewed in time", timeout=5)
        case.wait_completed(running)
        # The keeper's kill is counted once, as such, and not as a crash.
        running.wait_for_log("exited (signal SIGKILL)", timeout=5)
        scraped = scrape(port)
        assert scraped.value("jobq_workers_killed_total", reason="self_fence") == 1, scraped.text
        assert scraped.value("jobq_workers_killed_total") == 1, scraped.text
        assert scraped.value("jobq_worker_restarts_total") == 0, scraped.text
        stop(running)


def lost_lease(case: Case, kind: str) -> None:
    """The database no longer knows attempt 1's token (as if maintenance had given the job
    to another attempt): the next renewal round finds it lost, and the master kills it."""
    with case.supervise() as running:
        pids = case.first_attempt_started(running, kind)
        take_over(case)
        case.wait_gone(pids, LEASE + 2, running)
        # Logged once it is killed: the line may come moments after the worker is gone.
        running.wait_for_log(f"lost job {case.job_id} to another attempt", timeout=5)
        case.wait_completed(running)
        stop(running)


def take_over(case: Case) -> None:
    marker = "?" if case.dsn.startswith("sqlite") else "%s"
    sql = f"UPDATE jobq_jobs SET token = 'taken' WHERE id = {marker}"
    case.queue.backend.execute(sql, (case.job_id,))


def killed_master(case: Case, kind: str) -> None:
    with case.supervise() as running:
        pids = case.first_attempt_started(running, kind)
        running.signal(signal.SIGKILL)
        case.wait_gone(pids, 5, running)
    run_to_completion(case, kind)


def run_to_completion(case: Case, kind: str) -> None:
    """A supervisor runs the job until it completes: attempt 1 ends by the job's own doing
    (a crash, an exception), or ended before."""
    with case.supervise() as running:
        case.wait_completed(running)
        stop(running)


def stopped_by(signum: signal.Signals, *args: str) -> Callable[[Case, str], None]:
    """The supervisor is stopped by `signum` during attempt 1, and another one runs attempt 2."""

    def path(case: Case, kind: str) -> None:
        with case.supervise(*args) as running:
            case.first_attempt_started(running, kind)
            running.signal(signum)
            assert running.wait(30) == 0, running.log
        run_to_completion(case, kind)

    return path


PATHS: dict[str, tuple[Callable[[Case, str], None], str]] = {
    "job_timeout": (job_timeout, "hold"),
    "frozen_master": (frozen_master, "hold"),
    "killed_master": (killed_master, "hold"),
    "lost_lease": (lost_lease, "hold"),
    "crashed_worker": (run_to_completion, "crash"),
    "raised": (run_to_completion, "raise"),
    "quit": (stopped_by(signal.SIGQUIT), "hold"),
    "graceful_timeout": (stopped_by(signal.SIGTERM, "--graceful-timeout", "1"), "hold"),
}


@pytest.mark.databases("postgresql", "sqlite")
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("path", PATHS)
def test_no_process_of_an_attempt_overlaps_the_next_attempt(
    queue: jobq.Queue, dsn: str, tmp_path: Path, path: str, kind: str
) -> None:
    run, ending = PATHS[path]
    with enqueued(queue, dsn, tmp_path, kind, ending) as case:
        run(case, kind)
        # An attempt that raised ended in its worker; only its leftovers were cut short.
        case.judge(cut_short=ending != "raise" or kind in ("subprocess", "daemon"))


@pytest.mark.databases("postgresql")
@pytest.mark.parametrize("kind", KINDS)
def test_a_fenced_attempt_s_processes_die_before_the_next_attempt(
    queue: jobq.Queue, dsn: str, tmp_path: Path, kind: str
) -> None:
    with enqueued(queue, dsn, tmp_path, kind) as case:
        with (
            Proxy(address_of(dsn)) as proxy,
            case.supervise(dsn=proxied_dsn(dsn, proxy)) as running,
        ):
            pids = case.first_attempt_started(running, kind)
            proxy.blackhole()
            case.wait_gone(pids, LEASE + 2, running)
            proxy.restore()
            case.wait_completed(running)
            stop(running)
        case.judge()


# -- jobs the old self-fence got wrong ------------------------------------------------------


def run_until_completed(queue: jobq.Queue, dsn: str, jobs: int) -> Supervisor:
    """Run one worker until `jobs` jobs completed, then stop it; the stopped supervisor."""
    with supervisor(dsn, "--workers", "1", *FAST) as running:
        wait_for(
            f"{jobs} jobs to complete; log:\n{running.log}",
            lambda: queue.counts() == {"completed": jobs},
            timeout=40,
        )
        stop(running)
    return running


@pytest.mark.databases("postgresql", "sqlite")
def test_a_job_holding_the_gil_longer_than_its_lease_completes_while_renewed(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    # One C call of 8 s, with the GIL held throughout, on a 6 s lease.
    job = Attempted(str(journal), "gil", seconds=8, gil_hold=8)
    job_id = queue.enqueue(job, retry=RETRY)
    running = run_until_completed(queue, dsn, 1)
    record = queue.get(job_id)
    assert record is not None, record
    assert record.attempts == 1, record
    assert "not renewed in time" not in running.log, running.log


@pytest.mark.databases("sqlite")
def test_a_job_may_use_sigalrm_and_interval_timers(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    first = queue.enqueue(Alarm(str(journal), 0.1))
    second = queue.enqueue(Alarm(str(journal), 0.1))
    run_until_completed(queue, dsn, 2)
    ends = [e for e in read_journal(journal) if e["event"] == "end"]
    # The same worker ran both: its timer fired twice, and it lived on.
    assert sorted(e["job"] for e in ends) == sorted([first, second]), ends
    assert [e["alarms"] for e in ends] == [1, 1], ends
    assert len({e["pid"] for e in ends}) == 1, ends


# -- an acknowledgement lost to a broken connection -----------------------------------------


@pytest.mark.databases("postgresql", "mariadb")
def test_an_acknowledgement_lost_to_a_broken_connection_is_retried_on_a_new_one(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    job_id = queue.enqueue(CutConnection(str(journal), dsn, address_of(dsn)[1]), retry=RETRY)
    running = run_until_completed(queue, dsn, 1)
    record = queue.get(job_id)
    # Recorded by the same attempt, on a new connection: the job did not run again.
    assert record is not None, (record, running.log)
    assert record.attempts == 1, (record, running.log)
    assert "trying on a new connection" in running.log, running.log
    ends = [e for e in read_journal(journal) if e["event"] == "end"]
    assert [e["cut"] >= 1 for e in ends] == [True], ends
