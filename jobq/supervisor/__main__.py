import sys

from ..cli.commands import supervise_main

sys.exit(supervise_main())
