import sys

from .soak import main

sys.exit(main())
