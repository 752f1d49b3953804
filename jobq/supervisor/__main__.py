import sys

from ..cli import supervise_main

sys.exit(supervise_main())
