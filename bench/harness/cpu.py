"""CPU time spent during a drain, by the system under test and by PostgreSQL.

On this 2-core machine clients and the database share the CPU, so CPU per job is what decides
throughput: a client that spends more CPU per job leaves less for PostgreSQL.
"""

from __future__ import annotations

import contextlib
import resource
from pathlib import Path

import psutil


def cpu_of(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def children_cpu() -> float:
    """CPU seconds of every child process this process has reaped so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class TreeCpu:
    """The CPU time of some process trees, remembered per pid while each one lives, so that
    a process that exits between two samples keeps what it had used at the last one."""

    def __init__(self, roots: list[int]) -> None:
        self.roots = roots
        self.seen: dict[int, float] = {}
        self.start: dict[int, float] | None = None

    def sample(self) -> None:
        for root in self.roots:
            with contextlib.suppress(psutil.Error):
                parent = psutil.Process(root)
                for process in [parent, *parent.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        self.seen[process.pid] = cpu_of(process)

    def begin(self) -> None:
        self.sample()
        self.start = dict(self.seen)

    def used(self, pid: int | None = None) -> float | None:
        """CPU seconds since begin(), of every tree or of one pid."""
        if self.start is None:
            return None
        start = self.start
        pids = self.seen if pid is None else [pid]
        return sum(self.seen.get(p, 0.0) - start.get(p, 0.0) for p in pids)


class ServerCpu:
    """A PostgreSQL server's CPU time: the postmaster, its live children, and the children it
    has reaped (backends of clients that disconnected), which the kernel adds to its own
    children_user/children_system."""

    def __init__(self, data: Path) -> None:
        self.pid = int((data / "postmaster.pid").read_text().split()[0])
        self.start: float | None = None
        self.last: float | None = None

    def total(self) -> float:
        postmaster = psutil.Process(self.pid)
        t = postmaster.cpu_times()
        total = float(t.user + t.system + t.children_user + t.children_system)
        for child in postmaster.children():
            with contextlib.suppress(psutil.Error):
                total += cpu_of(child)
        return total

    def begin(self) -> None:
        self.start = self.last = self.total()

    def sample(self) -> None:
        self.last = self.total()

    def used(self) -> float | None:
        if self.start is None or self.last is None:
            return None
        return self.last - self.start


class Meter:
    """CPU of the system under test and of the database over the measured part of a drain:
    from the first poll that sees progress to the last poll before it is stopped."""

    def __init__(self, roots: list[int], server_data: Path | None, master: int | None = None):
        self.clients = TreeCpu(roots)
        self.server = ServerCpu(server_data) if server_data is not None else None
        self.master = master
        self.polls = 0

    def begin(self) -> None:
        self.clients.begin()
        if self.server is not None:
            self.server.begin()

    def sample(self, every: int = 10) -> None:
        """Called on each poll; samples every `every` polls (psutil costs CPU too)."""
        self.polls += 1
        if self.polls % every == 0:
            self.end()

    def end(self) -> None:
        self.clients.sample()
        if self.server is not None:
            with contextlib.suppress(psutil.Error):
                self.server.sample()

    def results(self) -> tuple[float | None, float | None, float | None]:
        """(client CPU s, master CPU s, server CPU s)."""
        master = None if self.master is None else self.clients.used(self.master)
        server = None if self.server is None else self.server.used()
        return self.clients.used(), master, server
