import sys

from .snapshot import freeze, release

# Before anything imports jobq: see snapshot.py.
code = freeze()
try:
    from .main import main

    status = main()
finally:
    release(code)
sys.exit(status)
