"""The problem layer: what to compute (:mod:`convcheck.problem.descriptor`) and where problems come from."""
