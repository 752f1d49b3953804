"""`jobq web` as a real process on a free loopback port, for tests that talk HTTP to it."""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

STARTUP_TIMEOUT = 30.0


@contextlib.contextmanager
def jobq_web(
    dsn: str,
    *args: str,
    cwd: Path,
    pythonpath: str | None = None,
    secrets: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """`jobq web --dsn DSN ARGS`, without authentication unless `secrets` gives its JOBQ_WEB_*
    variables; yields its address."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBQ_WEB_")}
    env.update(secrets or {})
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    process = subprocess.Popen(
        [sys.executable, "-m", "jobq", "web", "--dsn", dsn, "--bind", "127.0.0.1:0", *args],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
    )
    try:
        yield serving_address(process)
    finally:
        process.terminate()
        process.wait(timeout=STARTUP_TIMEOUT)


def serving_address(process: subprocess.Popen[str]) -> str:
    """The address from `jobq web: serving on http://...`, read within STARTUP_TIMEOUT."""
    assert process.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + STARTUP_TIMEOUT
    with selectors.DefaultSelector() as selector:
        selector.register(process.stderr, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=deadline - time.monotonic()):
                break
            line = process.stderr.readline()
            if not line:
                break
            seen.append(line)
            if "serving on " in line:
                return line.split("serving on ", 1)[1].strip()
    raise AssertionError(f"jobq web did not start; it said: {''.join(seen)}")
