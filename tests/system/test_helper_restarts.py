"""The master's helper processes (renewer, housekeeper, fence keeper) SIGKILLed at random
moments under load: each is replaced, and the promise holds with no attempt wasted. Every
run is judged by the history checker (no overlap, nothing lost), and every job must have
completed at its first attempt: a helper's death may cost nothing."""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import psutil
import pytest

from chaos.observe import HELPERS, Deaths, Observer, busy_workers, helpers_of, in_handle
from jobq.testing.history import read_journal
from tests.support.faults import (
    SETTINGS,
    all_completed,
    enqueue,
    judged,
    records_of,
    worker_pids,
)
from tests.support.supervising import Supervisor, http_get, metrics_port, scrape
from tests.support.supervising import supervisor as supervised
from tests.support.waiting import wait_for

WITH_METRICS = ("--metrics-port", "0", "--metrics-address", "127.0.0.1")


def helper_pid(running: Supervisor, helper: str) -> int | None:
    """The pid of the master's `helper` process, if one runs."""
    return helpers_of(running.pid).get(helper)


def renewed_since(port: int, running: Supervisor, extended: float) -> bool:
    """A renewal round extended leases since the count was `extended`, or none is held."""
    now = scrape(port).value("jobq_lease_renewals_total", result="extended")
    return now > extended or not busy_workers(running.pid)


def replaced(running: Supervisor, helper: str, old: int) -> int | None:
    pid = helper_pid(running, helper)
    return pid if pid not in (None, old) else None


def healthy(port: int) -> bool:
    return http_get(port, "/healthz")[0] == 200


@pytest.mark.databases("postgresql", "sqlite", "mariadb")
def test_helpers_killed_under_load_cost_no_attempt(dsn: str, tmp_path: Path) -> None:
    """Jobs longer than the lease need every renewal round; each helper is SIGKILLed twice,
    in a random order at random moments, some while a long job is inside handle(). Each is
    back within seconds, /healthz says so, the metric counts it, and no job ran twice."""
    rng = random.Random(24)
    journal = tmp_path / "journal"
    lengths = [7.0 if i % 3 == 0 else rng.uniform(0.1, 1.5) for i in range(18)]
    ids = enqueue(dsn, lengths, journal)
    observer = Observer(dsn)
    kills = [*HELPERS, *HELPERS]
    rng.shuffle(kills)
    with Deaths() as deaths, supervised(dsn, "--workers", "3", *SETTINGS, *WITH_METRICS) as sup:
        deaths.family(sup.pid)
        port = metrics_port(sup)
        for helper in kills:
            wait_for(
                "a worker inside a job",
                lambda: in_handle(read_journal(journal), worker_pids(sup), at_least=rng.random()),
                timeout=60,
            )
            old = wait_for(f"the {helper}", partial(helper_pid, sup, helper), timeout=15)
            deaths.kill(old, signal.SIGKILL)
            wait_for(f"another {helper}", partial(replaced, sup, helper, old), timeout=15)
            wait_for("/healthz to answer 200 again", partial(healthy, port), timeout=15)
            # Killed again before a renewal could land, the leases would run out: fenced,
            # rightly. One kill at a time is what this test is about.
            extended = scrape(port).value("jobq_lease_renewals_total", result="extended")
            wait_for("a renewal round", partial(renewed_since, port, sup, extended), timeout=15)
        wait_for("every job to complete", lambda: all_completed(observer, len(ids)), 120)
        restarts = scrape(port)
        sup.signal(signal.SIGTERM)
        assert sup.wait(30) == 0, sup.log
        records = records_of(observer, ids)
        judged(journal, deaths, records)
    observer.close()
    assert [r.attempts for r in records] == [1] * len(ids), sup.log
    for helper in HELPERS:
        label = helper.replace(" ", "_")
        value = restarts.value("jobq_helper_restarts_total", helper=label, reason="exited")
        assert value == 2, restarts.text
    assert "Lease of job" not in sup.log, sup.log  # nothing was fenced


# -- fork failures -------------------------------------------------------------------------------

PIDS = Path("/sys/fs/cgroup/pids")


@contextmanager
def pids_cgroup() -> Iterator[Path]:
    """A pids cgroup of its own (cgroup v1, as root): a real limit on forks, which the
    kernel enforces with EAGAIN (RLIMIT_NPROC does not bind root)."""
    if not os.access(PIDS / "cgroup.procs", os.W_OK):
        pytest.skip("needs a writable pids cgroup hierarchy at /sys/fs/cgroup/pids")
    group = PIDS / f"jobq-test-{secrets.token_hex(4)}"
    group.mkdir()
    try:
        yield group
    finally:
        wait_for("the cgroup to empty", lambda: not (group / "cgroup.procs").read_text().split())
        group.rmdir()


def confine(group: Path, root: int) -> None:
    """Move process `root` and everything under it into `group`, then allow no new task."""
    for process in [psutil.Process(root), *psutil.Process(root).children(recursive=True)]:
        with contextlib.suppress(OSError):  # gone meanwhile
            (group / "cgroup.procs").write_text(str(process.pid))
    (group / "pids.max").write_text("1")


@pytest.mark.databases("sqlite")
def test_failed_forks_are_an_outage_the_master_waits_out(dsn: str, tmp_path: Path) -> None:
    """Under a pids limit every fork fails with EAGAIN. A killed housekeeper and a killed
    worker cannot be replaced: the master logs it, backs off (no hot loop), says so on
    /healthz, and keeps its other workers. Once the limit is lifted it catches up."""
    enqueue(dsn, [], tmp_path / "journal")  # the schema
    with (
        pids_cgroup() as group,
        supervised(dsn, "--workers", "2", *SETTINGS, *WITH_METRICS) as sup,
    ):
        port = metrics_port(sup)
        sup.wait_for_log("ready", count=2)
        keeper = wait_for("the housekeeper", partial(helper_pid, sup, "housekeeper"))
        doomed, survivor = sorted(worker_pids(sup))
        confine(group, sup.pid)
        os.kill(keeper, signal.SIGKILL)
        os.kill(doomed, signal.SIGKILL)
        sup.wait_for_log("Cannot start a worker")
        sup.wait_for_log("The housekeeper is not running: it could not be started", count=3)
        status, body = http_get(port, "/healthz")
        assert (status, "housekeeper" in body) == (503, True), body
        assert sup.process.poll() is None, sup.log
        assert survivor in worker_pids(sup)
        failed = scrape(port).value("jobq_helper_restarts_total", reason="fork_failed")
        assert 3 <= failed < 30, f"{failed} failed starts: no backoff?\n{sup.log}"

        (group / "pids.max").write_text("max")
        wait_for("/healthz to answer 200 again", partial(healthy, port), timeout=30)
        wait_for("a second worker again", lambda: len(worker_pids(sup)) == 2, timeout=30)
        assert survivor in worker_pids(sup)
        sup.signal(signal.SIGTERM)  # the master's signals work as before the failures
        assert sup.wait(30) == 0, sup.log


# -- what a dead helper was sent -----------------------------------------------------------------


@pytest.mark.databases("postgresql", "sqlite")
def test_work_sent_to_a_housekeeper_that_dies_is_done_by_the_next(dsn: str, tmp_path: Path) -> None:
    """The housekeeper is frozen, so the failure of a killed worker's attempt waits unread in
    its socket; then it is SIGKILLed. Its replacement fails that attempt with the master's
    words, at once: not maintenance, a lease later."""
    journal = tmp_path / "journal"
    (job,) = enqueue(dsn, [8.0], journal)
    observer = Observer(dsn)
    with Deaths() as deaths, supervised(dsn, "--workers", "1", *SETTINGS) as sup:
        deaths.family(sup.pid)
        inside = lambda: in_handle(read_journal(journal), worker_pids(sup), at_least=1)  # noqa: E731
        worker = wait_for("the job inside handle()", inside, timeout=30)[0]["pid"]
        housekeeper = wait_for("the housekeeper", partial(helper_pid, sup, "housekeeper"))
        os.kill(housekeeper, signal.SIGSTOP)
        deaths.kill(worker)
        sup.wait_for_log(f"Worker {worker} exited")
        os.kill(housekeeper, signal.SIGKILL)
        failed_by_master = f"The worker died (worker {worker}, signal SIGKILL)"

        def failed() -> bool:
            record = observer.read(lambda queue: queue.get(job))
            return record is not None and failed_by_master in (record.last_error or "")

        wait_for(f"job {job}'s attempt to be failed by the new housekeeper", failed, timeout=15)
    observer.close()


@pytest.mark.databases("sqlite")
def test_no_job_is_claimed_while_no_renewer_runs(dsn: str, tmp_path: Path) -> None:
    """The renewer is killed and cannot be started again (a pids limit): a job claimed now
    could only be fenced, so the idle workers claim nothing until a renewer runs again."""
    journal = tmp_path / "journal"
    enqueue(dsn, [], journal)  # the schema
    observer = Observer(dsn)
    with (
        pids_cgroup() as group,
        supervised(dsn, "--workers", "2", *SETTINGS, *WITH_METRICS) as sup,
    ):
        port = metrics_port(sup)
        sup.wait_for_log("ready", count=2)
        renewer = wait_for("the renewer", partial(helper_pid, sup, "renewer"))
        confine(group, sup.pid)
        os.kill(renewer, signal.SIGKILL)
        sup.wait_for_log("The renewer is not running: it could not be started", count=2)
        ids = enqueue(dsn, [0.01] * 3, journal)
        # The workers poll every 0.2 s (FAST): several polls pass while the renewer is away.
        sup.wait_for_log("The renewer is not running: it could not be started", count=5)
        assert observer.counts() == {"pending": len(ids)}, sup.log
        assert http_get(port, "/healthz")[0] == 503
        (group / "pids.max").write_text("max")
        wait_for("every job to complete", lambda: all_completed(observer, len(ids)), 30)
        sup.signal(signal.SIGTERM)
        assert sup.wait(30) == 0, sup.log
    observer.close()
