"""Watching a run from outside: when processes died, which workers are busy, and reading a
queue whose database may be restarting.

Shared by tests/system/test_faults.py and the soak.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sqlite3
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import psutil
import psycopg
import pymysql

import jobq

T = TypeVar("T")

# How often the families being watched are listed again for new processes. A process born
# and dead within this interval is never seen, but a worker lives for many jobs, and one the
# injector kills is watched before the kill. (Listing reads all of /proc: not too often.)
FAMILY_POLL = 0.1


class Deaths:
    """Notes when each watched process was first seen gone, in time.monotonic().

    Processes are watched through pidfds, which turn readable the moment a process exits, so
    what is recorded is the exit (plus this thread's wake-up), not the next poll. The
    history checker takes these times as the ends of attempts killed before they could
    journal their end: they may only be late, which can only make it report an overlap that
    was not there, never hide one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roots: set[int] = set()
        self._fds: dict[int, int] = {}  # pidfd -> pid, while alive
        self._by_pid: dict[int, int] = {}  # pid -> pidfd, while alive
        self._seen: set[tuple[int, float]] = set()  # (pid, create time): never watched twice
        self.exits: dict[int, list[float]] = defaultdict(list)
        # pid -> when kill() last sent it SIGKILL: it ran none of its own code after that.
        self.killed: dict[int, float] = {}
        self._stopping = threading.Event()
        # Wakes the watching thread when a pidfd is added, so it is polled from then on.
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        self._thread = threading.Thread(target=self._run, name="deaths", daemon=True)
        self._thread.start()

    def __enter__(self) -> Deaths:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stopping.set()
        self._wake()
        self._thread.join(5)
        with self._lock:
            for fd in [*self._fds, self._wake_read, self._wake_write]:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._fds.clear()
            self._by_pid.clear()

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_write, b"x")

    def family(self, root: int) -> None:
        """Watch `root` and every process under it, now and as they are born."""
        with self._lock:
            self._roots.add(root)
        self.refresh()

    def watch(self, pid: int) -> bool:
        """Watch one process; False if it is gone already (its exit then goes unrecorded)."""
        try:
            process = psutil.Process(pid)
            key = (pid, process.create_time())
        except psutil.Error:
            return False
        with self._lock:
            if key in self._seen:
                return pid in self._by_pid
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                return False
            self._seen.add(key)
            self._fds[fd] = pid
            self._by_pid[pid] = fd
        self._wake()
        return True

    def refresh(self) -> None:
        """List every watched family again and watch what is new in it."""
        with self._lock:
            roots = list(self._roots)
        for root in roots:
            for pid in [root, *descendants(root)]:
                self.watch(pid)

    def kill(self, pid: int, signum: signal.Signals = signal.SIGKILL) -> bool:
        """Signal a watched process through its pidfd, so a reused pid cannot be hit."""
        self.watch(pid)
        with self._lock:
            fd = self._by_pid.get(pid)
        if fd is None:
            return False
        sent = time.monotonic()
        try:
            signal.pidfd_send_signal(fd, signum)
        except ProcessLookupError:
            return False
        if signum == signal.SIGKILL:
            self.killed[pid] = sent
        return True

    def alive(self, pid: int) -> bool:
        with self._lock:
            return pid in self._by_pid

    def wait_gone(self, pids: Iterable[int], timeout: float) -> bool:
        """Whether every one of `pids` was seen gone within `timeout`."""
        deadline = time.monotonic() + timeout
        while any(self.alive(pid) for pid in pids):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def _run(self) -> None:
        next_listing = 0.0
        while not self._stopping.is_set():
            if time.monotonic() >= next_listing:
                self.refresh()
                next_listing = time.monotonic() + FAMILY_POLL
            poller = select.poll()
            poller.register(self._wake_read, select.POLLIN)
            with self._lock:
                for fd in self._fds:
                    poller.register(fd, select.POLLIN)
            wait = max(0.0, next_listing - time.monotonic())
            ready = poller.poll(wait * 1000)
            now = time.monotonic()
            with self._lock:
                for fd, _ in ready:
                    if fd == self._wake_read:
                        with contextlib.suppress(BlockingIOError):
                            os.read(fd, 4096)
                        continue
                    pid = self._fds.pop(fd, None)
                    if pid is None:
                        continue
                    self.exits[pid].append(now)
                    self._by_pid.pop(pid, None)
                    os.close(fd)

    def exits_for(self, entries: Iterable[Mapping[str, Any]]) -> dict[int, float]:
        """pid -> when it died, for the history checker: for each attempt that never
        journaled its end, the first death of its process after the attempt started.

        Should a pid have been reused by a second process that also died mid-attempt, the
        later death is taken for both, which can only make the report stricter.
        """
        entries = list(entries)
        ended = {(e["job"], e["attempt"], e["pid"]) for e in entries if e["event"] == "end"}
        with self._lock:
            exits = {pid: sorted(times) for pid, times in self.exits.items()}
        found: dict[int, float] = {}
        for entry in entries:
            key = (entry["job"], entry["attempt"], entry["pid"])
            if entry["event"] != "start" or key in ended:
                continue
            after = [t for t in exits.get(entry["pid"], []) if t >= entry["mono"]]
            if after:
                found[entry["pid"]] = max(found.get(entry["pid"], after[0]), after[0])
        return found


def descendants(root: int) -> list[int]:
    """Every process under `root`, from /proc/<pid>/task/<tid>/children: a few small reads,
    where psutil's children() reads the status of every process on the machine."""
    found: list[int] = []
    parents = [root]
    while parents:
        parent = parents.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as listing:
                    children = [int(pid) for pid in listing.read().split()]
            except OSError:
                continue
            found += children
            parents += children
    return found


def in_handle(
    entries: Iterable[Mapping[str, Any]], pids: Iterable[int], at_least: float
) -> list[Mapping[str, Any]]:
    """Start entries of Chaos attempts still inside handle() for at least `at_least` more
    seconds, by workers among `pids`: a SIGKILL sent now lands inside the job."""
    entries = list(entries)
    ended = {(e["job"], e["attempt"], e["pid"]) for e in entries if e["event"] == "end"}
    wanted = set(pids)
    now = time.monotonic()
    return [
        e
        for e in entries
        if e["event"] == "start"
        and e["pid"] in wanted
        and (e["job"], e["attempt"], e["pid"]) not in ended
        and e["mono"] + float(e.get("seconds", 0)) - now >= at_least
    ]


def titles_of(master: int) -> dict[int, str]:
    """{pid: process title} of the live processes right under `master`."""
    found = {}
    try:
        children = psutil.Process(master).children()
    except psutil.Error:
        return {}
    for child in children:
        with contextlib.suppress(psutil.Error):
            if child.status() != psutil.STATUS_ZOMBIE:
                found[child.pid] = " ".join(filter(None, child.cmdline()))
    return found


def busy_workers(master: int) -> dict[int, int]:
    """{worker pid: job id} of the workers under `master` holding a job, from their titles
    ("jobq-supervise: worker job 42 ...")."""
    busy = {}
    for pid, title in titles_of(master).items():
        words = title.split()
        if words[:3] == ["jobq-supervise:", "worker", "job"]:
            with contextlib.suppress(ValueError, IndexError):
                busy[pid] = int(words[3])
    return busy


HELPERS = ("renewer", "housekeeper", "fence keeper")


def helpers_of(master: int) -> dict[str, int]:
    """{helper: pid} of the master's live helper processes, from their titles
    ("jobq-supervise: renewer")."""
    found = {}
    for pid, title in titles_of(master).items():
        helper = title.removeprefix("jobq-supervise: ")
        if helper in HELPERS:
            found[helper] = pid
    return found


DATABASE_ERRORS = (psycopg.Error, pymysql.err.Error, sqlite3.Error, OSError)


class Observer:
    """Reads a queue on a connection of its own, opening a new one whenever the last one
    failed: the database may be restarting under it."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.queue: jobq.Queue | None = None

    def read(self, what: Callable[[jobq.Queue], T]) -> T | None:
        """what(queue), or None if the database could not answer."""
        try:
            if self.queue is None:
                self.queue = jobq.Queue.connect(self.dsn)
            return what(self.queue)
        except DATABASE_ERRORS:
            self.close()
            return None

    def counts(self) -> dict[str, int] | None:
        return self.read(lambda queue: queue.counts())

    def close(self) -> None:
        if self.queue is not None:
            with contextlib.suppress(*DATABASE_ERRORS):
                self.queue.close()
            self.queue = None
