"""Where a jobq worker's time goes during a drain: py-spy attached to jobq-supervise and its
children, sampling either the Python code holding the GIL (`--gil`: CPU spent in Python and
C code called with the GIL held; waits on the database release it and do not show), or wall
time (`--idle`: every sample of the worker's main thread, waiting on the database included).

The profile is taken in a drain of its own, never during a measured one: sampling slows the
workers down a little even with --nonblocking.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from ..harness.app import Noop
from ..harness.context import REPO, Bench
from ..harness.jobqdb import JobqDb, supervise_cmd
from ..harness.results import Profile

FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def py_spy() -> str | None:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    return found if Path(found).exists() else None


def short(frame: str) -> str:
    """'claim (/x/site-packages/jobq/queue.py:270)' -> 'claim (jobq/queue/__init__.py)'."""
    m = FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    path = m.group("file")
    for marker in ("site-packages/", "/lib/python3", str(REPO) + "/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{m.group('func')} ({path})"


# A sample in one of these is in a database round trip: waiting for the reply, or for the CPU
# while sending it (on 2 busy cores a runnable process that is not running looks busy too).
ROUND_TRIP = "Cursor.execute (psycopg/cursor.py)"


def summarize(
    raw: Path, top: int = 15
) -> tuple[int, list[tuple[str, float]], list[tuple[str, float]], list[tuple[str, float]]]:
    """(worker samples, top functions by self share, top functions by inclusive share), over
    the stacks of worker processes only (their title says `worker`)."""
    self_counts: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    outside: Counter[str] = Counter()
    total = outside_total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        frames = stack.split(";")
        chain = [f for f in frames if f.startswith("process ")]
        if not chain or "supervise: worker" not in chain[-1]:
            continue  # the master, the renewer or the housekeeper
        names = [short(f) for f in frames if f.strip() and not f.startswith("process ")]
        loop = next((i for i, n in enumerate(names) if n.startswith("Child.work ")), None)
        if loop is None:
            continue  # start-up, or the thread that follows the master's messages
        count = int(count_text)
        total += count
        names = names[loop + 1 :] or names[loop:]
        self_counts[names[-1]] += count
        for name in set(names):
            inclusive[name] += count
        if ROUND_TRIP not in names:
            outside_total += count
            for name in set(names):
                outside[name] += count
    if total == 0:
        return 0, [], [], []
    return (
        total,
        [(name, n / total) for name, n in self_counts.most_common(top)],
        [(name, n / total) for name, n in inclusive.most_common(top)],
        [(name, n / total) for name, n in outside.most_common(top)],
    )


def profiled_cmd(dsn: str, workers: int, prefetch: int | None) -> list[str]:
    """The supervisor profiled: jobq's defaults, or a fixed `--prefetch` (1: one job at a
    time, the path whose per-job cost the floor compares with)."""
    extra = () if prefetch is None else ("--prefetch", str(prefetch))
    return supervise_cmd(dsn, workers, *extra)


def profile(
    bench: Bench, dsn: str, workers: int, seconds: float, idle: bool, prefetch: int | None = None
) -> Profile:
    tool = py_spy()
    kind = "wall" if idle else "cpu"
    raw = bench.tmp / f"profile-{kind}.txt"
    result = Profile(workers, 0, [], [], str(raw))
    if tool is None:
        result.note = "py-spy is not installed (pip install py-spy)"
        return result
    # Enough jobs to outlast the sampling at several thousand jobs/s.
    jobs = int(seconds * 6000) + 10000
    db = JobqDb(dsn)
    try:
        db.reset()
        db.preload(Noop(), jobs)
        db.settle()
        proc = bench.procs.spawn(
            f"jobq-profile-{kind}", profiled_cmd(dsn, workers, prefetch), env=bench.env(), cwd=REPO
        )
        # Start sampling once the workers are running jobs, not while they start up.
        deadline = time.monotonic() + 30
        while db.unfinished() == jobs and time.monotonic() < deadline:
            time.sleep(0.05)
        cmd = [
            tool, "record", "--pid", str(proc.pid), "--subprocesses", "--nonblocking",
            "--rate", "200", "--duration", str(int(seconds)), "--format", "raw",
            "--output", str(raw), *(["--idle"] if idle else ["--gil"]),
        ]  # fmt: skip
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=seconds + 60, check=False
            )
            if done.returncode != 0:
                result.note = f"py-spy failed: {done.stderr.strip()[-300:]}"
        except subprocess.TimeoutExpired:
            result.note = "py-spy did not finish"
        bench.procs.stop(proc, signal.SIGQUIT, grace=20.0)
    finally:
        db.close()
    if raw.exists():
        result.samples, result.self_top, result.inclusive_top, result.outside_top = summarize(raw)
    return result
