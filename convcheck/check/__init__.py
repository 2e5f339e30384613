"""The check layer: one check (the implementations, the fill, the error model's entry, the comparison) and its pipeline (:mod:`convcheck.check.pipeline`)."""
