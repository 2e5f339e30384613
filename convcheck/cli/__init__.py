"""The command line (:mod:`convcheck.cli.main`) and its options."""
