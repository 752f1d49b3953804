import sys

from .harness.snapshot import freeze, jobq_at, release

# Before anything imports jobq: see harness/snapshot.py.
code = freeze(jobq_at(sys.argv[1:]))
try:
    from .main import main

    status = main()
finally:
    release(code)
sys.exit(status)
