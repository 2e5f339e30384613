"""``python -m convcheck``: the same command as ``convcheck``."""

import sys

from .cli.main import main

sys.exit(main())
