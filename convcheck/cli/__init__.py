"""The command line (:mod:`convcheck.cli.main`, whose names are also read from here) and its options."""

from . import main as _main
from .main import *  # noqa: F401,F403

# the module's own helpers too (older code read them from here)
globals().update({k: v for k, v in vars(_main).items() if k.startswith("_") and not k.startswith("__")})
