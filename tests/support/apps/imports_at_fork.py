"""jobq-supervise with the master's modules written down at each of its forks, for the test
that the master imports only what it needs (tests/system/test_master_imports.py).

Run as `python -m imports_at_fork` (the tests put this folder on PYTHONPATH), with
IMPORTS_AT_FORK naming the file: each fork the master makes appends one line, the sorted
names in sys.modules, JSON. Forks made by its children are not the master's and are left
out. A hook of Python's own (os.register_at_fork), so the master runs unchanged.
"""

from __future__ import annotations

import json
import os
import sys

from jobq.cli.supervise import main as supervise_main

MASTER = os.getpid()


def write_modules() -> None:
    if os.getpid() == MASTER:
        with open(os.environ["IMPORTS_AT_FORK"], "a") as file:
            file.write(json.dumps(sorted(sys.modules)) + "\n")


if __name__ == "__main__":
    os.register_at_fork(before=write_modules)
    sys.exit(supervise_main())
