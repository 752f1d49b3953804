"""Fault tests for the supervisor's fencing: no worker may outlive its lease, whatever happens
to the master or to its link to the database.

Each test measures "slack": the job's lease_until, read from the database on a direct
connection (never through the proxy), minus the wall-clock moment the worker process was
seen gone. The database runs on this machine, so its clock is ours. A fenced worker must be
gone at least the safety margin before its lease ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psutil
import pytest

import jobq
from jobq.outcomes import LEASE_EXPIRED
from jobq.records import JobRecord, Status
from tests.support.apps.supervised_app import Hold
from tests.support.proxy import Proxy, address_of, proxied_dsn
from tests.support.supervising import (
    FAST,
    Supervisor,
    alive,
    events,
    fill,
    safe_cmdline,
    supervisor,
)
from tests.support.waiting import wait_for, wait_lease_ended

# TERM, then KILL a second later: the timing rule then needs a lease of at least 7 s.
# (argparse keeps the last value of a repeated option.)
WITH_KILL_GRACE = (*FAST, "--lease", "7", "--kill-grace", "1")
# A retried attempt starts at once, so recovery shows up within the test's patience.
RETRY = jobq.RetryPolicy(max_attempts=3, backoff=0, jitter=False)
F_SETPIPE_SZ = 1031
# How often a worker's death is looked for: the error in the recorded moment of death, which
# can only make the recorded slack smaller than it was.
DEATH_POLL = 0.002


def option(args: Sequence[str], name: str) -> float:
    """The value a supervisor started with `args` uses for option `name` (the last one)."""
    values = [args[i + 1] for i, arg in enumerate(args) if arg == name]
    return float(values[-1])


@pytest.fixture
def queue(dsn: str) -> Iterator[jobq.Queue]:
    """A direct connection: what the test reads is never behind the proxy."""
    with jobq.Queue.connect(dsn, lease_duration=option(FAST, "--lease")) as queue:
        queue.install()
        yield queue


class Held:
    """A Hold job the test ends (by creating its release file) only when it wants to."""

    def __init__(self, queue: jobq.Queue, tmp_path: Path, ignore_term: bool = False) -> None:
        self.journal = tmp_path / "journal"
        self.release = tmp_path / "release"
        job = Hold(str(self.journal), str(self.release), ignore_term=ignore_term)
        self.id = queue.enqueue(job, retry=RETRY)

    def wait_started(
        self, running: Supervisor, attempt: int = 1, timeout: float = 30.0
    ) -> dict[str, Any]:
        """The journal's entry for the start of `attempt`, once there is one."""
        started = wait_for(
            f"attempt {attempt} of job {self.id} to start; log:\n{running.log}",
            lambda: [e for e in events(self.journal, "start", self.id) if e["attempt"] == attempt],
            timeout,
        )
        return started[0]


def lease_end(queue: jobq.Queue, job_id: int) -> float:
    """The job's lease_until as a Unix time, as the database has it now."""
    record = queue.get(job_id)
    assert record is not None, record
    assert record.lease_until is not None, record
    return record.lease_until.timestamp()


def wait_renewed(queue: jobq.Queue, job_id: int, claimed_until: float) -> None:
    """Wait until a renewal has landed: the lease reaches past what the claim set."""
    wait_for(
        f"a renewal of job {job_id} to land",
        lambda: lease_end(queue, job_id) > claimed_until,
        timeout=10,
    )


def wait_recovered(
    queue: jobq.Queue, job_id: int, running: Supervisor, timeout: float
) -> tuple[JobRecord, float]:
    """Wait until the first attempt was settled (the job pending, or claimed again).

    Also returns when the first attempt's lease ended: the last lease_until seen while it was
    in progress, since a renewal the proxy held may still have landed late and extended it.
    """
    lease_ended = 0.0

    def settled() -> JobRecord | None:
        nonlocal lease_ended
        record = queue.get(job_id)
        assert record is not None
        if record.status == Status.IN_PROGRESS and record.attempts == 1:
            assert record.lease_until is not None
            lease_ended = max(lease_ended, record.lease_until.timestamp())
            return None
        return record

    record = wait_for(f"job {job_id} to be recovered; log:\n{running.log}", settled, timeout)
    assert record is not None
    return record, lease_ended


def wait_dead(pid: int, timeout: float) -> float:
    """Poll until process `pid` is gone (or a zombie); return time.time() when first seen so."""
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} still alive after {timeout} s")
        time.sleep(DEATH_POLL)
    return time.time()


def assert_fenced_in_time(died: float, lease_until: float, margin: float, log: str) -> None:
    slack = lease_until - died
    print(f"slack: {slack:.3f} s (safety margin {margin:g} s)")  # shown with -s or on failure
    assert slack >= margin, (
        f"the worker was seen gone {slack:.3f} s before its lease ended, "
        f"less than the {margin:g} s safety margin\n{log}"
    )


def assert_attempts_did_not_overlap(held: Held, first_pid: int, first_died: float) -> None:
    """Attempt 1 never reached its end; attempt 2 started only after attempt 1's worker died."""
    starts = events(held.journal, "start", held.id)
    assert [(e["attempt"], e["pid"]) for e in starts[:1]] == [(1, first_pid)], starts
    assert [e["attempt"] for e in starts] == [1, 2], starts
    assert starts[1]["wall"] >= first_died, (
        f"attempt 2 started {first_died - starts[1]['wall']:.3f} s before attempt 1's worker "
        "was gone"
    )
    ends = events(held.journal, "end", held.id)
    assert all(e["attempt"] != 1 for e in ends), f"attempt 1 reached its end: {ends}"


def assert_left_to_maintenance(job_id: int, running: Supervisor) -> None:
    # The master decides when it reaps the worker, which it does within a tick of its death.
    try:
        running.wait_for_log(f"Job {job_id} was left to maintenance", timeout=3)
    except AssertionError:
        raise AssertionError(
            f"the master did not leave job {job_id} to maintenance after its worker was fenced "
            f"for want of a renewal; log:\n{running.log}"
        ) from None


def assert_keeper_fenced(job_id: int, running: Supervisor) -> None:
    """The fence keeper, not the master, killed the attempt."""
    running.wait_for_log(f"Lease of job {job_id} was not renewed in time", timeout=5)


def finish(held: Held, queue: jobq.Queue, running: Supervisor) -> None:
    """Let the running attempt end, see the job completed, and stop the supervisor cleanly."""
    held.release.touch()
    wait_for(
        f"job {held.id} to complete; log:\n{running.log}",
        lambda: queue.counts() == {"completed": 1},
        timeout=15,
    )
    running.signal(signal.SIGTERM)
    assert running.wait(30) == 0, running.log


def exit_line(pid: int, running: Supervisor) -> str:
    """The master's log line saying how worker `pid` exited."""
    running.wait_for_log(f"Worker {pid} exited", timeout=10)
    return next(line for line in running.lines if f"Worker {pid} exited" in line)


# -- the master cannot renew ---------------------------------------------------------------


@pytest.mark.databases("postgresql", "mariadb")
@pytest.mark.parametrize("fault", ["blackhole", "slowed", "blackhole-frozen-master"])
def test_a_worker_whose_lease_cannot_be_renewed_dies_before_the_lease_ends(
    queue: jobq.Queue, dsn: str, tmp_path: Path, fault: str
) -> None:
    # The slowed link also goes through TERM then KILL: its job ignores SIGTERM, so only the
    # SIGKILL that follows (or the worker's own timer) can end it.
    slowed = fault == "slowed"
    # A master that misses its fence point (starved of CPU, or stopped) leaves the fencing to
    # the worker's own timer, and learns of it only when it reaps the worker afterwards.
    frozen = fault == "blackhole-frozen-master"
    args = WITH_KILL_GRACE if slowed else FAST
    margin = option(args, "--safety-margin")
    held = Held(queue, tmp_path, ignore_term=slowed)
    with (
        Proxy(address_of(dsn)) as proxy,
        supervisor(proxied_dsn(dsn, proxy), "--workers", "1", *args) as running,
    ):
        worker = held.wait_started(running)["pid"]
        # Only after a renewal landed is it the master's renewals, not the claim, that the
        # fence has to stop vouching for.
        wait_renewed(queue, held.id, lease_end(queue, held.id))
        if slowed:
            # Each way, so a round trip takes 3 s: past the 1 s renewal timeout, every time.
            proxy.delay(1500)
        else:
            proxy.blackhole()
        if frozen:
            running.signal(signal.SIGSTOP)
        try:
            died = wait_dead(worker, timeout=option(args, "--lease") + 2)
            # Read now: a renewal sent before the fault may still land later (the proxy
            # delivers what it held), which could only make the lease longer than it was.
            lease_until = lease_end(queue, held.id)
        finally:
            if frozen:
                running.signal(signal.SIGCONT)
        assert_fenced_in_time(died, lease_until, margin, running.log)
        how = exit_line(worker, running)
        # The master's SIGKILL and the fence keeper's are due at the same moment, and either
        # may win; a SIGTERM would mean the kill grace was skipped.
        assert "signal SIGKILL" in how, how
        if frozen:
            assert_keeper_fenced(held.id, running)  # only the keeper could fence it
        if slowed:
            # The master's SIGTERM is due a kill grace before the worker's own timer, so it
            # is the master that fenced first here; the worker ignored it and lived on.
            assert "cannot be renewed in time" in running.log, running.log
        # Whichever fence fired, the renewal could not land: the master must not fail the
        # attempt (as it would a crash) but leave it to maintenance, after the lease.
        assert_left_to_maintenance(held.id, running)
        record = queue.get(held.id)
        assert record is not None
        assert (record.status, record.attempts, record.last_error) == (
            Status.IN_PROGRESS,
            1,
            None,
        ), record

        # The database is reachable again before the lease ends: nothing may settle the
        # attempt early (the worker is gone, but the job is only free after its lease).
        proxy.restore()
        recovered, lease_ended = wait_recovered(queue, held.id, running, timeout=15)
        assert recovered.last_error == LEASE_EXPIRED, recovered
        second = held.wait_started(running, attempt=2, timeout=15)
        assert second["wall"] >= lease_ended, (
            f"attempt 2 started {lease_ended - second['wall']:.3f} s before attempt 1's lease "
            f"ended; log:\n{running.log}"
        )
        assert_attempts_did_not_overlap(held, worker, died)
        finish(held, queue, running)


# -- the log stalls --------------------------------------------------------------------------


def small_pipe() -> tuple[int, int]:
    """A pipe (read end, write end) at its smallest capacity, which a few lines fill."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, F_SETPIPE_SZ, 4096)
    os.set_blocking(read_end, False)
    return read_end, write_end


def drain(fd: int) -> str:
    taken = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 65536):
            taken += chunk
    return taken.decode(errors="replace")


def stall_and_fence(
    held: Held, queue: jobq.Queue, proxy: Proxy, running: Supervisor, read_end: int
) -> None:
    """The stalled-log test's steps, once its supervisor runs with its log going to read_end."""
    log = [""]

    def started() -> list[dict[str, Any]]:
        log[0] += drain(read_end)  # read until the stall begins
        return [e for e in events(held.journal, "start", held.id) if e["attempt"] == 1]

    worker = wait_for("the job to start", started, timeout=30)[0]["pid"]
    wait_renewed(queue, held.id, lease_end(queue, held.id))
    log[0] += drain(read_end)
    fill(f"/proc/{running.pid}/fd/2")  # from here, nobody reads
    proxy.blackhole()
    died = wait_dead(worker, timeout=option(FAST, "--lease") + 2)
    lease_until = lease_end(queue, held.id)
    assert_fenced_in_time(died, lease_until, option(FAST, "--safety-margin"), log[0])
    assert running.process.poll() is None, "the master died"
    proxy.restore()

    def said() -> bool:
        log[0] += drain(read_end)
        return any(text in log[0] for text in ("cannot be renewed", "not renewed in time"))

    # Not lost: the line waited for the reader (an overflow would be dropped, and counted).
    wait_for("the fence's line, once the log is read again", said, timeout=15)


@pytest.mark.databases("postgresql")
def test_fencing_goes_on_while_nobody_reads_the_log(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    """The supervisor's stderr is a pipe that is full and never read (a stalled `| tee`),
    and its database is blackholed: the master and the fence keeper must still kill the
    worker before its lease ends; their log lines wait, and are written once it is read."""
    held = Held(queue, tmp_path)
    read_end, write_end = small_pipe()
    with Proxy(address_of(dsn)) as proxy:
        running = Supervisor(proxied_dsn(dsn, proxy), ("--workers", "1", *FAST), stderr=write_end)
        try:
            os.close(write_end)
            stall_and_fence(held, queue, proxy, running, read_end)
        finally:
            running.stop()
    os.close(read_end)


# -- the master is killed ------------------------------------------------------------------


def test_a_killed_master_takes_its_busy_worker_and_helpers_with_it(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    lease = option(FAST, "--lease")
    held = Held(queue, tmp_path)
    with supervisor(dsn, "--workers", "1", *FAST) as running:
        worker = held.wait_started(running)["pid"]
        family = {
            p.pid: " ".join(safe_cmdline(p))
            for p in psutil.Process(running.pid).children(recursive=True)
        }
        assert worker in family, family
        for helper in ("renewer", "housekeeper"):
            assert any(helper in title for title in family.values()), family
        killed = time.time()
        running.signal(signal.SIGKILL)
        died = wait_dead(worker, timeout=5)
        lease_until = lease_end(queue, held.id)
        # PR_SET_PDEATHSIG: the kernel kills it with the master, not the keeper a lease later.
        gone = f"worker gone {died - killed:.3f} s after the master"
        print(f"{gone}, {lease_until - died:.3f} s before its lease ended")
        assert died - killed < 1.0, f"the worker outlived its master by {died - killed:.3f} s"
        assert lease_until - died > lease / 2, (
            f"the worker died only {lease_until - died:.3f} s before its lease ended"
        )
        for pid in family:
            wait_dead(pid, timeout=5)
        assert running.wait(5) == -signal.SIGKILL

    # Nothing was left to fail the attempt: maintenance recovers it, and only after the lease.
    assert queue.run_maintenance()["requeued"] == 0
    wait_lease_ended(queue, held.id)
    assert queue.run_maintenance()["requeued"] == 1
    record = queue.get(held.id)
    assert record is not None
    assert (record.status, record.attempts, record.last_error) == (
        Status.PENDING,
        1,
        LEASE_EXPIRED,
    ), record

    with supervisor(dsn, "--workers", "1", *FAST) as rerun:
        held.wait_started(rerun, attempt=2)
        assert_attempts_did_not_overlap(held, worker, died)
        finish(held, queue, rerun)


# -- the master is frozen ------------------------------------------------------------------


def test_a_frozen_master_s_busy_worker_fences_itself(
    queue: jobq.Queue, dsn: str, tmp_path: Path
) -> None:
    lease = option(FAST, "--lease")
    margin = option(FAST, "--safety-margin")
    held = Held(queue, tmp_path)
    with supervisor(dsn, "--workers", "1", *FAST) as running:
        worker = held.wait_started(running)["pid"]
        # Once renewals are under way, so the lease the worker must die ahead of is one the
        # master extended, not just the claim's.
        wait_renewed(queue, held.id, lease_end(queue, held.id))
        running.signal(signal.SIGSTOP)
        try:
            died = wait_dead(worker, timeout=lease + 2)
            lease_until = lease_end(queue, held.id)
            assert_fenced_in_time(died, lease_until, margin, running.log)
            # Still frozen: the fence keeper did it, not the master.
            assert psutil.Process(running.pid).status() == psutil.STATUS_STOPPED
            # The attempt that runs next may complete.
            held.release.touch()
        finally:
            running.signal(signal.SIGCONT)
        how = exit_line(worker, running)
        assert "signal SIGKILL" in how, how
        assert_keeper_fenced(held.id, running)
        held.wait_started(running, attempt=2, timeout=15)
        assert_attempts_did_not_overlap(held, worker, died)
        finish(held, queue, running)


# -- the proxy itself ----------------------------------------------------------------------


def test_the_proxy_forwards_delays_blackholes_and_restores() -> None:
    """What the tests above rely on, against a local echo server."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        echo = threading.Thread(target=serve_echo, args=(server,), daemon=True)
        echo.start()
        with Proxy(server.getsockname()) as proxy:
            client = socket.create_connection((proxy.host, proxy.port), timeout=2)
            with client:
                assert round_trip(client, b"plain") < 0.2
                proxy.delay(150)
                assert 0.3 <= round_trip(client, b"slow") < 1.0  # 150 ms each way
                proxy.blackhole()
                client.sendall(b"held")
                late = socket.create_connection((proxy.host, proxy.port), timeout=2)
                with late:
                    late.sendall(b"late")
                    # Neither the old connection nor the new one gets anything through...
                    for quiet in (client, late):
                        quiet.settimeout(0.3)
                        with pytest.raises(TimeoutError):
                            quiet.recv(16)
                    # ...yet neither was closed, and both get what was held on restore.
                    assert proxy.open_links == 2
                    proxy.restore()
                    client.settimeout(2)
                    late.settimeout(2)
                    assert client.recv(16) == b"held"
                    assert late.recv(16) == b"late"
            wait_for("the proxy to drop closed links", lambda: proxy.open_links == 0, 2)
            proxy.blackhole()  # closing must not wait on a blackhole
            closing = time.monotonic()
        assert time.monotonic() - closing < 1.0
        assert not any(t.name.startswith("proxy-") for t in threading.enumerate())


def serve_echo(server: socket.socket) -> None:
    while True:
        try:
            peer, _ = server.accept()
        except OSError:
            return  # the test closed the server
        threading.Thread(target=echo_back, args=(peer,), daemon=True).start()


def echo_back(peer: socket.socket) -> None:
    with peer, contextlib.suppress(OSError):
        while data := peer.recv(4096):
            peer.sendall(data)


def round_trip(client: socket.socket, data: bytes) -> float:
    started = time.monotonic()
    client.sendall(data)
    assert client.recv(len(data)) == data
    return time.monotonic() - started
