import sys

from ..cli.supervise import main as supervise_main

sys.exit(supervise_main())
