"""What the pytest examples (08, 11, 12) do when run as scripts: print the problem their tests
check and the cuDNN graph that problem is (or why the graph cannot be built here), then run the
file's own tests under pytest. The light install has no pytest: then one line says how to get it
and the exit is 3, the examples' "cannot run here"."""

from __future__ import annotations

import sys


def show_then_test(file: str, descriptor: str, what: str) -> int:
    """``file``'s tests under pytest, after ``descriptor``'s problem (``what`` says where the tests use
    it) and its cuDNN graph."""
    from convcheck import parse_descriptor
    from convcheck.check.backends.cudnn_graph import graph_text_or_why

    problem = parse_descriptor(descriptor)
    print(f"problem: {problem} ({what})")
    print("the same convolution as a cuDNN graph:\n" + graph_text_or_why(problem))
    try:
        import pytest
    except ImportError:
        print("the tests of this example run under pytest, which is not installed "
              "(pip install pytest, or bash scripts/setup.sh --tests)", file=sys.stderr)
        return 3
    return pytest.main([file, "-q", "-p", "no:cacheprovider"])
