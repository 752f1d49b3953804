"""A jobq command's process title: its command line without the secrets in it.

Every user of the machine can read a process's command line (`ps`, /proc/PID/cmdline), and
`--dsn` may carry the database's password. Each command rewrites it as soon as its arguments
are parsed, as the supervisor's master and workers replace theirs with what they are doing.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from setproctitle import setproctitle

from ..dsn import scrub


def hide_secrets(prog: str, argv: Sequence[str] | None) -> None:
    """`argv` is what main() was given: None when run from the command line. A command run
    in-process (a test, an embedding program) leaves its host's title alone."""
    if argv is not None:
        return
    words = sys.argv[1:]
    # Each word scrubbed as the DSN it may be: a URL's password, or a `password=` keyword.
    shown = [scrub(word, word) for word in words]
    if shown != words:
        setproctitle(" ".join([prog, *shown]))
