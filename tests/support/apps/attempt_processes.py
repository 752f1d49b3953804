"""Processes a job starts, for the fencing tests: each journals its own start and end.

    python attempt_processes.py run|daemon JOURNAL JOB ATTEMPT SECONDS

`run` works for SECONDS in this process. `daemon` double-forks (the middle process calls
setsid and exits at once, as a daemonizing launcher does) and the grandchild, in a session
of its own and no longer anyone's child but the subreaper's, does the work; the launcher
returns as soon as the daemon started.
"""

from __future__ import annotations

import json
import os
import sys
import time


def journal(path: str, event: str, job: int, attempt: int) -> None:
    entry = {
        "event": event,
        "job": job,
        "attempt": attempt,
        "pid": os.getpid(),
        "mono": time.monotonic(),
        "wall": time.time(),
        "process": "subprocess",
    }
    with open(path, "a") as file:
        file.write(json.dumps(entry) + "\n")


def work(path: str, job: int, attempt: int, seconds: float, started: int | None = None) -> None:
    """Journal the start (then write to the fd `started`, if given), work, journal the end."""
    journal(path, "start", job, attempt)
    if started is not None:
        os.write(started, b"x")
        os.close(started)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.02)
    journal(path, "end", job, attempt)


def daemonize(path: str, job: int, attempt: int, seconds: float) -> None:
    started_r, started_w = os.pipe()
    if os.fork() > 0:
        os.close(started_w)
        os.read(started_r, 1)  # returns once the daemon journaled its start (or died)
        return
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    os.close(started_r)
    work(path, job, attempt, seconds, started_w)
    os._exit(0)


def main() -> None:
    mode, path, job, attempt, seconds = sys.argv[1:]
    if mode == "run":
        work(path, int(job), int(attempt), float(seconds))
    else:
        daemonize(path, int(job), int(attempt), float(seconds))


if __name__ == "__main__":
    main()
