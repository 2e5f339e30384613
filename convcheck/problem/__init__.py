"""The problem layer: what to compute (:mod:`convcheck.problem.descriptor`, whose names are also read from here) and where problems come from."""

from . import descriptor as _main
from .descriptor import *  # noqa: F401,F403

# the module's own helpers too (older code read them from here)
globals().update({k: v for k, v in vars(_main).items() if k.startswith("_") and not k.startswith("__")})
