"""The check layer: one check (the implementations, the fill, the error model's entry, the comparison) and its pipeline (:mod:`convcheck.check.pipeline`), whose names are also read from here."""

from . import pipeline as _main
from .pipeline import *  # noqa: F401,F403

# the module's own helpers too (older code read them from here)
globals().update({k: v for k, v in vars(_main).items() if k.startswith("_") and not k.startswith("__")})
