"""An attempt's processes: the worker and everything its job started, found and killed.

Killing the worker alone is not enough: a job that shells out (pg_restore, ffmpeg, a vendor
script) leaves its subprocess running, and the job's next attempt would overlap with it.
Three things together find every local process of an attempt:
- its process group: each worker leads its own, set right after fork, and whatever the job
  starts stays in it unless it leaves on purpose (setsid, setpgid);
- a mark in the environment, JOBQ_WORKER=<worker pid>, set once as the worker starts: every
  program its jobs run inherits it, even one that left the group, like a daemon that
  double-forked and called setsid (a process worker runs one attempt at a time and kills
  what each one left, so the worker's mark names its attempt; setting a job's id in the
  environment per attempt was 2.5% of a short job's CPU, for no reader);
- the master is a child subreaper, so such an escapee is reparented to the master (which
  reaps it), not to init, and a worker can find its own escapees among the master's children.

A process that both leaves the group and drops or replaces its environment is out of reach;
so is anything not on this machine (see the README on what the guarantee covers).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

import psutil

from ..pid import getpid

MARK = "JOBQ_WORKER"
# How often a kill is checked on while it is being confirmed.
CONFIRM_POLL = 0.005
GONE = (ProcessLookupError, FileNotFoundError, PermissionError, psutil.Error)
PROC_CHUNK = 65536


def mark() -> None:
    """Mark whatever this worker starts from now on as its attempts'."""
    os.environ[MARK] = str(os.getpid())


def read_proc(path: str) -> bytes:
    """A small /proc file, without the cost of open()'s buffered file object."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, PROC_CHUNK):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def running(pid: int) -> bool:
    """Whether process `pid` exists and is no zombie (a child the job never waited for)."""
    try:
        stat = read_proc(f"/proc/{pid}/stat")
    except FileNotFoundError:
        return False
    # The state follows the command name, which is in parentheses and may hold anything.
    return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] != b"Z"


def started(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot), None if it is gone: with its pid,
    it names one process, since a reused pid has a later start."""
    try:
        stat = read_proc(f"/proc/{pid}/stat")
    except FileNotFoundError:
        return None
    # The fields after the command name, from the state (field 3) on: starttime is field 22.
    return int(stat[stat.rindex(b")") + 2 :].split()[19])


# Processes as (pid, start): see started().
Processes = frozenset[tuple[int, int]]


def identified(pids: list[int]) -> Processes:
    return frozenset((pid, start) for pid in pids if (start := started(pid)) is not None)


def has_children() -> bool:
    """Whether this process has a child, running or a zombie, of any of its threads: one
    system call that reaps nothing (WNOWAIT), where own_children() reads /proc once per
    thread. No child is the common case, a job that started no process."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def own_children() -> set[int]:
    """The running children of this process, of any of its threads."""
    found: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(FileNotFoundError):
            found.update(int(pid) for pid in read_proc(f"/proc/self/task/{task}/children").split())
    return {pid for pid in found if running(pid)}


def marked(pid: int, worker: int) -> bool:
    """Whether process `pid` carries the mark of worker `worker`'s attempts."""
    environment = read_proc(f"/proc/{pid}/environ")
    return f"{MARK}={worker}".encode() in environment.split(b"\0")


def members(worker: int) -> list[int]:
    """The processes of worker `worker`'s attempt that still run (zombies run nothing);
    never the calling process."""
    found = []
    me = os.getpid()
    for process in psutil.process_iter():
        pid = process.pid
        if pid == me:
            continue
        with contextlib.suppress(*GONE):
            if (os.getpgid(pid) == worker or marked(pid, worker)) and (
                process.status() != psutil.STATUS_ZOMBIE
            ):
                found.append(pid)
    return found


def kill(
    worker: int, signum: signal.Signals = signal.SIGKILL, spare: Processes = frozenset()
) -> list[int]:
    """Signal every process of the attempt; returns those that were found still running.

    Only while `worker` is unreaped, or its group still has members, does its pid name the
    group: the kernel reuses neither before then. A worker cleaning up after its own job
    spares itself, and so its group, and the processes in `spare` (its own, from before the
    attempt).
    """
    if worker != os.getpid():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(worker, signum)
    running = [pid for pid in members(worker) if (pid, started(pid)) not in spare]
    for pid in running:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)
    return running


def kill_and_confirm(worker: int, timeout: float, spare: Processes = frozenset()) -> bool:
    """SIGKILL the attempt until a look finds none of its processes running; False if some
    still ran after `timeout` (a process stuck in the kernel cannot be killed sooner)."""
    deadline = time.monotonic() + timeout
    while kill(worker, spare=spare):
        if time.monotonic() >= deadline:
            return False
        time.sleep(CONFIRM_POLL)
    return True


class Leftovers:
    """Whether a worker's job left processes behind: a child of the worker's own, or one of
    its escapees among the master's children. Asked after every attempt, so it is cheap: the
    worker's own children are read from /proc only when waitid says it has any, the master's
    children in one read, and those already found unmarked (the other workers, the helpers)
    are not read again; the thorough search runs only when this finds something. (Measured
    on a loaded 2-core machine with 10 siblings: 0.9 ms a job reading every sibling's
    environment with open() each time, 0.05 ms with the cache.)

    What runs before an attempt starts is the worker's own, not the attempt's: a process
    pool or sidecar that on_worker_start started. starting() takes stock of those before
    each attempt: a full look at the worker's processes before the first, then again only
    when the worker's children changed since (a pool that replaced one of its processes).
    """

    def __init__(self, master: int) -> None:
        self.master = master
        # The master's children file, opened once and read again from its start: opening it
        # per attempt was half of this check's cost.
        self.master_children: int | None = None
        self.unmarked: set[int] = set()
        # The master's children as last read, when every one of them was found unmarked.
        self.looked_at = b""
        # The worker's own processes, and its children when they were counted (None: never).
        self.own: Processes = frozenset()
        self.children: set[int] | None = None

    def starting(self) -> None:
        """An attempt starts: whatever runs now is the worker's."""
        children = own_children() if has_children() else set()
        if children != self.children:
            self.own = identified(members(os.getpid()))
            self.children = children

    def found(self) -> bool:
        if has_children() and any((pid, started(pid)) not in self.own for pid in own_children()):
            return True
        # An escapee whose parent exited is the master's child now, not the worker's.
        me = getpid()
        try:
            children = self.read_master_children()
        except (FileNotFoundError, ProcessLookupError):
            return False
        if children == self.looked_at:
            return False  # the same children, each of them in self.unmarked already
        siblings = {int(pid) for pid in children.split()} - {me}
        # Only current children are remembered, so a pid reused meanwhile is read again.
        self.unmarked &= siblings
        for pid in siblings - self.unmarked:
            with contextlib.suppress(*GONE):
                if marked(pid, me) and (pid, started(pid)) not in self.own:
                    return True
            self.unmarked.add(pid)
        self.looked_at = children
        return False

    def read_master_children(self) -> bytes:
        """The master's children file, from its start; each read lists them as they are."""
        if self.master_children is None:
            path = f"/proc/{self.master}/task/{self.master}/children"
            self.master_children = os.open(path, os.O_RDONLY)
        return reread(self.master_children)


def reread(fd: int) -> bytes:
    """A /proc file held open, read whole from its start: pread, which needs no seek."""
    chunks = [os.pread(fd, PROC_CHUNK, 0)]
    while len(chunks[-1]) == PROC_CHUNK:
        chunks.append(os.pread(fd, PROC_CHUNK, PROC_CHUNK * len(chunks)))
    return b"".join(chunks)
