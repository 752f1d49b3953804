"""jobq-supervise's signals, with real processes: TERM/INT drain, QUIT, HUP, TTIN/TTOU, and
the LISTEN/NOTIFY wake-up that a drain must not wait behind."""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

import jobq
from jobq.supervisor.signals import ECHO
from tests.support.apps.supervised_app import Hold, Sleep
from tests.support.supervising import FAST, alive, events, read_journal, supervisor, wait_for_events
from tests.support.waiting import wait_for

# A lease of 6 s (FAST): holding a job this long after its claim proves it was renewed.
PAST_THE_LEASE = 7.5


pytestmark = pytest.mark.lease(6)


def hold(queue: jobq.Queue, journal: Path, release: Path, max_attempts: int | None = None) -> int:
    policy = None if max_attempts is None else jobq.RetryPolicy(max_attempts=max_attempts)
    return queue.enqueue(Hold(str(journal), str(release)), retry=policy)


def interrupted(queue: jobq.Queue, job_id: int) -> str:
    """The job's last error, once its attempt has been failed as interrupted by a stop."""

    def last_error() -> str:
        record = queue.get(job_id)
        return "" if record is None else record.last_error or ""

    error = wait_for(f"job {job_id}'s attempt to be failed", last_error, timeout=10)
    assert "Interrupted: the supervisor shut down" in error, error
    return error


# -- TERM / INT: drain -------------------------------------------------------------------------


def test_term_drains_renewing_leases_until_the_running_jobs_end(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    journal, release = tmp_path / "journal", tmp_path / "release"
    held = [hold(queue, journal, release) for _ in range(2)]
    with supervisor(dsn, "--workers", "2", "--graceful-timeout", "30", *FAST) as running:
        starts = wait_for_events(journal, "start", 2)
        # Both workers are busy, so this one can only be claimed by a worker that keeps
        # claiming during the drain.
        pending = queue.enqueue(Sleep(0, str(journal)))
        running.signal(signal.SIGTERM)
        running.wait_for_log("Retiring worker", count=2)
        # Held past the lease's length: only renewals keep the attempts theirs (and the
        # workers' own fences unfired), so waiting out the lease is the point here.
        until = max(e["mono"] for e in starts) + PAST_THE_LEASE
        wait_for("the lease to be outlived", lambda: time.monotonic() >= until, timeout=15)
        for job_id in held:
            record = queue.get(job_id)
            assert record is not None
            assert (str(record.status), record.attempts) == ("in_progress", 1)
        assert running.process.poll() is None, "the master left before its jobs ended"
        release.touch()
        assert running.wait(timeout=20) == 0
    assert sorted(e["job"] for e in events(journal, "start")) == sorted(held)
    assert sorted(e["job"] for e in events(journal, "end")) == sorted(held)
    for job_id in held:
        record = queue.get(job_id)
        assert record is not None
        assert (str(record.status), record.attempts) == ("completed", 1)
    record = queue.get(pending)
    assert record is not None
    assert (str(record.status), record.attempts) == ("pending", 0)


def master_command(dsn: str) -> list[str]:
    """The supervisor's command line, for a test that runs it under another command."""
    return [sys.executable, "-m", "jobq.supervisor", "--dsn", dsn, "--app", "supervised_app"]


def completed_in_one_attempt(queue: jobq.Queue, job_ids: list[int]) -> None:
    for job_id in job_ids:
        record = queue.get(job_id)
        assert record is not None
        assert (str(record.status), record.attempts) == ("completed", 1)


@pytest.mark.databases("sqlite", "postgresql")
def test_a_term_to_the_whole_process_group_drains_like_a_term_to_the_master(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    # As `timeout`, a shell's job control or a container runtime send it. setsid makes the
    # master lead a group of its own (keeping this test out of it), without a fork.
    journal, release = tmp_path / "journal", tmp_path / "release"
    held = [hold(queue, journal, release) for _ in range(2)]
    args = ("--workers", "2", "--graceful-timeout", "30", *FAST)
    with supervisor(dsn, *args, command=["setsid", *master_command(dsn)]) as running:
        wait_for_events(journal, "start", 2)
        assert os.getpgid(running.pid) == running.pid
        everyone = [pid for pid in running.titles() if pid != running.pid]
        os.killpg(running.pid, signal.SIGTERM)
        running.wait_for_log("Retiring worker", count=2)
        assert all(alive(pid) for pid in everyone), running.titles()
        release.touch()
        assert running.wait(timeout=20) == 0, running.log
    assert "is not running" not in running.log, "a helper died"
    assert "SIGTERM" not in running.log, running.log
    assert sorted(e["job"] for e in events(journal, "end")) == sorted(held)
    completed_in_one_attempt(queue, held)


@pytest.mark.databases("sqlite")
def test_a_term_that_timeout_passes_on_twice_is_one_drain(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    # timeout(1) passes a TERM it receives on to its command and then to their process group:
    # the master gets it twice, a moment apart, which must not count as a second request.
    journal, release = tmp_path / "journal", tmp_path / "release"
    job_id = hold(queue, journal, release)
    args = ("--workers", "1", "--graceful-timeout", "30", *FAST)
    with supervisor(dsn, *args, command=["timeout", "600", *master_command(dsn)]) as running:
        wait_for_events(journal, "start")
        running.signal(signal.SIGTERM)
        running.wait_for_log("Draining")
        release.touch()
        assert running.wait(timeout=20) == 0, running.log
    assert "Second stop request" not in running.log
    completed_in_one_attempt(queue, [job_id])


@pytest.mark.databases("sqlite")
def test_int_drains_like_term(queue: jobq.Queue, dsn: str, tmp_path: Path) -> None:
    journal, release = tmp_path / "journal", tmp_path / "release"
    job_id = hold(queue, journal, release)
    with supervisor(dsn, "--workers", "1", "--graceful-timeout", "30", *FAST) as running:
        wait_for_events(journal, "start")
        running.signal(signal.SIGINT)
        running.wait_for_log("Retiring worker")
        release.touch()
        assert running.wait(timeout=20) == 0
    record = queue.get(job_id)
    assert record is not None
    assert str(record.status) == "completed"


def test_graceful_timeout_stops_the_rest_and_fails_their_attempts_as_interrupted(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    journal, release = tmp_path / "journal", tmp_path / "release"
    job_id = hold(queue, journal, release, max_attempts=1)
    with supervisor(dsn, "--workers", "2", "--graceful-timeout", "1", *FAST) as running:
        wait_for_events(journal, "start")
        worker = events(journal, "start")[0]["pid"]
        signalled = time.monotonic()
        running.signal(signal.SIGTERM)
        assert running.wait(timeout=20) == 0
        elapsed = time.monotonic() - signalled
        running.wait_for_log("Graceful timeout reached")
    assert elapsed >= 1, "stopped before the graceful timeout"
    error = interrupted(queue, job_id)
    assert f"worker {worker}" in error
    record = queue.get(job_id)
    assert record is not None
    assert str(record.status) == "failed"
    assert not events(journal, "end"), "the job ran to its end: it was not stopped"


@pytest.mark.parametrize(
    "stops",
    [(signal.SIGTERM, signal.SIGTERM), (signal.SIGQUIT,)],
    ids=["second-TERM", "QUIT"],
)
def test_a_second_term_or_quit_stops_at_once(
    queue: jobq.Queue, dsn: str, tmp_path: Path, stops: tuple[signal.Signals, ...]
) -> None:
    journal, release = tmp_path / "journal", tmp_path / "release"
    job_id = hold(queue, journal, release, max_attempts=1)
    # A graceful timeout far beyond the bounded wait below: only an immediate stop passes.
    with supervisor(dsn, "--workers", "1", "--graceful-timeout", "600", *FAST) as running:
        wait_for_events(journal, "start")
        if len(stops) == 2:
            running.signal(stops[0])
            running.wait_for_log("Draining")
            # A repeat within ECHO of the master's receipt of the first request is taken for
            # that request arriving twice. The receipt comes before its log line, so ECHO
            # counted from the line being seen covers ECHO counted from the receipt, however
            # late a loaded machine ran the master's handler.
            first = time.monotonic()
            wait_for("ECHO to pass", lambda: time.monotonic() - first > ECHO)
        running.signal(stops[-1])
        assert running.wait(timeout=15) == 0
    assert "Graceful timeout reached" not in running.log
    interrupted(queue, job_id)
    record = queue.get(job_id)
    assert record is not None
    assert str(record.status) == "failed"
    assert not events(journal, "end")


# -- HUP: rolling reload -----------------------------------------------------------------------


def ready_counts(messages: list[str]) -> list[int]:
    """Replay the master's log: how many workers were claiming after each event.

    A worker claims from its "ready" line until it is retired (told to drain) or exits.
    """
    claiming: set[int] = set()
    counts = []
    for message in messages:
        if found := re.match(r"Worker (\d+) ready", message):
            claiming.add(int(found.group(1)))
        elif found := re.match(r"Retiring worker (\d+)|Worker (\d+) exited", message):
            claiming.discard(int(found.group(1) or found.group(2)))
        else:
            continue
        counts.append(len(claiming))
    return counts


class Feeder:
    """Enqueues a short job every few milliseconds, on its own connection, until stopped."""

    def __init__(self, dsn: str, journal: Path) -> None:
        self.dsn = dsn
        self.journal = journal
        self.ids: list[int] = []
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self.feed, daemon=True)
        self.thread.start()

    def feed(self) -> None:
        try:
            with jobq.Queue.connect(self.dsn, lease_duration=6) as queue:
                # The pace of the stream, not a synchronisation: jobs a little longer than the
                # gap between them keep workers busy while they are being replaced.
                while not self.done.wait(0.08):
                    self.ids.append(queue.enqueue(Sleep(0.2, str(self.journal))))
        except BaseException as error:
            self.error = error

    def stop(self) -> list[int]:
        self.done.set()
        self.thread.join(10)
        if self.error is not None:
            raise self.error
        return self.ids


def test_hup_replaces_every_worker_one_at_a_time_without_losing_a_job(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    workers = 3
    with supervisor(dsn, "--workers", str(workers), *FAST) as running:
        running.wait_for_log("ready", count=workers)
        feeder = Feeder(dsn, journal)
        try:
            wait_for_events(journal, "end", 5)
            old = {p.pid for p in running.workers()}
            assert len(old) == workers
            reloaded = time.monotonic()
            running.signal(signal.SIGHUP)
            running.wait_for_log("Retiring worker", count=workers, timeout=30)
            wait_for(
                "a pool of new workers only",
                lambda: (
                    len(new := {p.pid for p in running.workers()}) == workers
                    and not new & old
                    and sum(f"Worker {pid} ready" in running.log for pid in new) == workers
                ),
                timeout=30,
            )
            new = {p.pid for p in running.workers()}
            # The stream goes on a little, so the new workers are seen running jobs.
            wait_for(
                "jobs run by the new workers",
                lambda: {e["pid"] for e in events(journal, "end")} & new,
                timeout=10,
            )
        finally:
            ids = feeder.stop()
        wait_for(
            f"all {len(ids)} jobs to complete",
            lambda: queue.counts() == {"completed": len(ids)},
            timeout=30,
        )
        running.signal(signal.SIGTERM)
        assert running.wait() == 0
    messages = running.messages()
    assert sum(m.endswith("(reload)") for m in messages) == workers
    # One at a time: never fewer than workers - 1 claiming, once the pool first filled up.
    drain = next(i for i, m in enumerate(messages) if m.endswith("(drain)"))
    counts = ready_counts(messages[:drain])
    full = counts.index(workers)
    assert min(counts[full:]) >= workers - 1, counts
    starts = events(journal, "start")
    assert sorted(e["job"] for e in starts) == sorted(ids), "a job was lost or ran twice"
    assert all(e["attempt"] == 1 for e in starts)
    # The old workers went on with their jobs after the HUP until their turn came.
    assert any(e["pid"] in old and e["mono"] > reloaded for e in events(journal, "end"))
    # Workers forked after the HUP run the application as they imported it, after the HUP.
    assert all(e["imported"] > reloaded for e in starts if e["pid"] in new)
    assert all(e["imported"] < reloaded for e in starts if e["pid"] in old)


# -- TTIN / TTOU -------------------------------------------------------------------------------


@pytest.mark.databases("sqlite")
def test_ttin_adds_a_worker_and_ttou_retires_an_idle_one(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    journal, release = tmp_path / "journal", tmp_path / "release"
    job_id = hold(queue, journal, release)

    def pool(size: int) -> set[int]:
        def pids() -> set[int]:
            return {p.pid for p in running.workers()}

        wait_for(f"{size} workers", lambda: len(pids()) == size)
        return pids()

    with supervisor(dsn, "--workers", "2", *FAST) as running:
        busy = wait_for_events(journal, "start")[0]["pid"]
        before = pool(2)
        running.signal(signal.SIGTTIN)
        running.wait_for_log("Pool size now 3")
        after = pool(3)
        assert before < after
        running.signal(signal.SIGTTOU)
        running.wait_for_log("Pool size now 2")
        pool(2)
        running.signal(signal.SIGTTOU)
        running.wait_for_log("Pool size now 1")
        # Idle workers go first: the one running a job is left to finish it.
        assert pool(1) == {busy}
        # Never below one worker.
        running.signal(signal.SIGTTOU)
        running.wait_for_log("Pool size stays 1")
        running.signal(signal.SIGTTIN)
        running.wait_for_log("Pool size now 2", count=2)
        pool(2)
        release.touch()
        wait_for("the held job to complete", lambda: queue.counts() == {"completed": 1})
        running.signal(signal.SIGTERM)
        assert running.wait() == 0
    assert [e["job"] for e in events(journal, "end")] == [job_id]


# -- LISTEN/NOTIFY -----------------------------------------------------------------------------


@pytest.mark.databases("postgresql")
def test_notify_wakes_an_idle_worker_and_does_not_delay_a_drain(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    with supervisor(dsn, "--workers", "1", *FAST, "--poll-interval", "30") as running:
        running.wait_for_log("ready")
        for count in (1, 2):
            # The worker found nothing, so it waits for a wake-up: polling alone would take
            # up to 30 s to see these jobs.
            enqueued = time.monotonic()
            queue.enqueue(Sleep(0, str(journal)))
            started = wait_for_events(journal, "start", count, timeout=10)[-1]["mono"]
            assert started - enqueued < 5
        stopping = time.monotonic()
        running.signal(signal.SIGTERM)
        assert running.wait(timeout=20) == 0
        # An idle worker blocked on LISTEN for the whole poll interval would hold up the drain.
        assert time.monotonic() - stopping < 5
    assert len(read_journal(journal)) == 4


# -- echoes of one stop request ----------------------------------------------------------------
