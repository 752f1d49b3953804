"""Commands whose reader stops reading (`jobq jobs | head`) end quietly, as shell tools do."""

from __future__ import annotations

import functools
import os
import select
import sys
from collections.abc import Sequence
from typing import Protocol

# The exit status of a command whose stdout was closed before it had written everything, as
# in `jobq jobs | head`: 128 + SIGPIPE, what a shell reports for a tool the signal ended, so a
# script under `set -o pipefail` sees the same from jobq as from `cat`.
CLOSED_STDOUT = 141


def stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader is gone (poll reports an error on it)."""
    try:
        events = select.poll()
        events.register(sys.stdout.fileno(), 0)
        return any(flags & select.POLLERR for _, flags in events.poll(0))
    except (OSError, ValueError):
        return False


class Entry(Protocol):
    """A command's entry point: its arguments, or sys.argv's; its exit status."""

    def __call__(self, argv: Sequence[str] | None = None) -> int: ...


def quiet_on_closed_stdout(entry: Entry) -> Entry:
    """An entry point that ends quietly, with CLOSED_STDOUT, when its reader stops reading.

    Output is flushed here, not at the interpreter's exit, where a failed flush prints
    "Exception ignored" and a traceback. Then devnull takes stdout's place, so that the
    final flush at exit has somewhere to write what is left. A BrokenPipeError from
    anything else (a socket, a worker's pipe) is no closed stdout: it goes on up."""

    @functools.wraps(entry)
    def run(argv: Sequence[str] | None = None) -> int:
        try:
            try:
                return entry(argv)
            finally:
                sys.stdout.flush()
        except BrokenPipeError:
            if not stdout_closed():
                raise
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return CLOSED_STDOUT

    return run
