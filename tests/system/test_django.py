"""jobq.contrib.django in a real Django project (tests/support/djangoproject): Django's own test
runner on a test database that the migrations gave jobq's tables, and jobs using the ORM in
forked workers under `manage.py jobq supervise`, through a database that ends its sessions."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from contextlib import AbstractContextManager

import psycopg
import pytest

import jobq
from tests.support import drivers
from tests.support.paths import REPO
from tests.support.supervising import FAST, Supervisor, supervisor
from tests.support.waiting import wait_for

PROJECT = REPO / "tests" / "support" / "djangoproject"


def manage(dsn: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=PROJECT,
        env={**os.environ, "ORDERS_DSN": dsn, "ORDERS_PERSISTENT_CONNECTIONS": ""},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def test_djangos_test_runner_gets_jobqs_tables_and_transactional_enqueue(dsn: str) -> None:
    output = ok(manage(dsn, "test", "orders.tests", "--noinput", "-v", "2"))
    assert "Applying jobq.0001_install... OK" in output
    assert "Ran 11 tests" in output, output
    assert "\nOK" in output, output


@pytest.fixture
def project(dsn: str) -> str:
    """A migrated project database (jobq's tables included); its DSN."""
    ok(manage(dsn, "migrate", "--noinput"))
    return dsn


def supervise(dsn: str, *args: str, persistent: bool = False) -> AbstractContextManager[Supervisor]:
    """`manage.py jobq supervise`, which takes the DSN from the project's settings."""
    command = [sys.executable, "manage.py", "jobq", "supervise"]
    env = {"ORDERS_DSN": dsn, "ORDERS_PERSISTENT_CONNECTIONS": "1" if persistent else ""}
    return supervisor(dsn, *args, env=env, command=command, cwd=PROJECT)


def orders(dsn: str, db_kind: str) -> list[tuple[int, int, str]]:
    """Each order's id, number and receipt."""
    app = drivers.connect(dsn, db_kind, autocommit=True)
    try:
        cursor = app.cursor()
        cursor.execute("SELECT id, number, receipt FROM orders_order")
        rows = cursor.fetchall()
        cursor.close()
    finally:
        app.close()
    return [tuple(row) for row in rows]


def receipts(dsn: str, db_kind: str) -> dict[int, str]:
    """Each order's receipt, made by MakeReceipt if at all."""
    rows = orders(dsn, db_kind)
    for order, number, receipt in rows:
        assert receipt == "" or receipt.startswith(f"receipt for order {order} number {number} ")
    return {order: receipt for order, _, receipt in rows}


def all_done(dsn: str, db_kind: str, count: int) -> bool:
    made = receipts(dsn, db_kind)
    return len(made) == count and all(made.values())


def place(
    running: Supervisor, dsn: str, db_kind: str, count: int, total: int, *options: str
) -> None:
    """Place `count` orders, then wait until `total` orders have their receipts."""
    ok(manage(dsn, "place_orders", str(count), *options))
    what = f"{total} receipts; log:\n{running.log}"
    wait_for(what, lambda: all_done(dsn, db_kind, total), 60)


def stop(running: Supervisor) -> None:
    running.signal(signal.SIGTERM)
    assert running.wait() == 0


@pytest.mark.databases("postgresql", "sqlite", "mariadb")
def test_jobs_use_the_orm_in_forked_workers(project: str, db_kind: str) -> None:
    with supervise(project, "--workers", "2", *FAST) as running:
        place(running, project, db_kind, 40, total=40)
        stop(running)
    with jobq.Queue.connect(project) as queue:
        assert queue.counts() == {"completed": 40}
    workers = {receipt.rsplit(" ", 1)[1] for receipt in receipts(project, db_kind).values()}
    assert str(running.pid) not in workers


@pytest.mark.databases("postgresql")
def test_thread_and_coroutine_jobs_use_the_orm_in_a_concurrent_worker(
    project: str, db_kind: str
) -> None:
    """Plain jobs in the worker's threads, and coroutine jobs through sync_to_async, each
    with Django's connection handling per attempt."""
    with supervise(project, "--workers", "1", "--concurrency", "4", *FAST) as running:
        place(running, project, db_kind, 10, total=10)
        place(running, project, db_kind, 10, 20, "--coroutines")
        stop(running)
    with jobq.Queue.connect(project) as queue:
        assert queue.counts() == {"completed": 20}
        kinds = Counter(record.class_name for record in queue.jobs())
    assert sorted(kinds.values()) == [10, 10], kinds


@pytest.mark.databases("postgresql")
def test_a_cancelled_coroutine_s_orm_work_in_sync_to_async_ends_before_its_outcome(
    project: str, db_kind: str
) -> None:
    """A coroutine job's ORM work takes 3 s in asgiref's thread; cancelled meanwhile, its
    attempt waits for that thread before it ends cancelled. So nothing it writes comes after
    its job reads cancelled, nor after the retry an operator asks for then begins."""
    args = ("--workers", "1", "--concurrency", "4", *FAST, "--lease", "20", "--kill-grace", "8")
    with supervise(project, *args) as running, jobq.Queue.connect(project) as queue:
        ok(manage(project, "place_orders", "1", "--slow", "3"))
        (job,) = queue.jobs()

        def receipt() -> str:
            ((_, _, written),) = orders(project, db_kind)
            return written

        wait_for("the first attempt to begin", receipt, 30)
        assert queue.cancel(job.id)
        wait_for("the cancel", lambda: queue.get(job.id).status is jobq.Status.CANCELLED, 30)  # type: ignore[union-attr]
        at_cancel = receipt()
        assert queue.retry(job.id)
        wait_for("the retry", lambda: "2:ended;" in receipt(), 30)
        stop(running)
        assert at_cancel == "1:began;1:late;", at_cancel
        assert receipt() == "1:began;1:late;2:began;2:ended;"


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize("app", [None, "orders.jobs"])
def test_jobq_supervise_sets_a_django_project_up_in_its_workers(
    project: str, db_kind: str, app: str | None
) -> None:
    command = [sys.executable, "-m", "jobq.supervisor", "--dsn", project]
    env = {"ORDERS_DSN": project, "DJANGO_SETTINGS_MODULE": "project.settings"}
    args = ("--workers", "1", *FAST, *(["--app", app] if app else []))
    with supervisor(project, *args, env=env, command=command, cwd=PROJECT) as running:
        place(running, project, db_kind, 5, total=5)
        stop(running)


@pytest.mark.databases("sqlite")
def test_a_django_project_without_its_settings_is_refused_with_a_hint(dsn: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "jobq.supervisor", "--dsn", dsn, "--app", "orders.jobs"],
        cwd=PROJECT,
        env={k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "cannot import --app 'orders.jobs'" in result.stderr
    assert "need DJANGO_SETTINGS_MODULE set, or run `manage.py jobq supervise`" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.databases("postgresql")
def test_jobs_after_the_database_ended_the_workers_sessions_still_succeed(
    project: str, db_kind: str
) -> None:
    with supervise(project, "--workers", "2", *FAST, persistent=True) as running:
        place(running, project, db_kind, 10, total=10)
        with psycopg.connect(project, autocommit=True) as admin:
            ended = admin.execute(
                "SELECT query LIKE '%orders_order%' AS django, pg_terminate_backend(pid)"
                " FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
        # The sessions of Django (persistent ones, kept after their jobs) and of jobq.
        assert {django for django, _ in ended} == {True, False}
        place(running, project, db_kind, 10, total=20)
        stop(running)
    with jobq.Queue.connect(project) as queue:
        assert queue.counts() == {"completed": 20}
        # Not one attempt failed on a dead connection.
        records = [queue.get(job_id) for job_id in range(1, 21)]
        assert [record.attempts for record in records if record is not None] == [1] * 20


@pytest.mark.databases("sqlite")
@pytest.mark.databases("postgresql")
def test_an_ipv6_host_in_djangos_settings_gives_jobq_a_dsn_that_connects(dsn: str) -> None:
    # The project's settings take HOST from ORDERS_DSN: "::1", as a Django user writes it.
    over_ipv6 = dsn.replace("@127.0.0.1:", "@[::1]:")
    assert over_ipv6 != dsn
    ok(manage(over_ipv6, "migrate", "--noinput"))
    ok(manage(over_ipv6, "place_orders", "2"))
    # jobq's own connection, from the DSN it built out of DATABASES.
    assert '"pending": 2' in ok(manage(over_ipv6, "jobq", "stats", "--json"))


def test_manage_py_jobq_runs_jobqs_commands_on_the_projects_database(
    dsn: str, db_kind: str
) -> None:
    ok(manage(dsn, "jobq", "migrate"))
    ok(manage(dsn, "migrate", "--noinput"))
    ok(manage(dsn, "place_orders", "3"))
    assert '"pending": 3' in ok(manage(dsn, "jobq", "stats", "--json"))
    ok(manage(dsn, "jobq", "work", "--max-jobs", "3"))
    assert all_done(dsn, db_kind, 3)
    refused = manage(dsn, "jobq", "destroy")
    assert refused.returncode != 0
    assert "manage.py jobq {supervise," in refused.stderr
