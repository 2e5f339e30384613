"""convcheck: does a cuDNN convolution compute the right answer? With evidence.

Library entry points::

    from convcheck import parse_descriptor, run_check
    result = run_check(parse_descriptor("mb2ic16ih14oc8oh14kh3ph1"))
    print(result.status, result.comparison.max_abs_diff)

    from convcheck import assert_conv_close          # your own kernel, in your own tests
    assert_conv_close(my_conv(x, w), x, w, padding=1)
"""

__version__ = "0.1.0"

from .problem import ConvProblem, parse_descriptor, read_batch_file  # noqa: E402
from .check import CheckResult, run_check  # noqa: E402
from .assertions import assert_conv_close, assert_conv_input_grad_close, assert_conv_weight_grad_close  # noqa: E402

__all__ = ["ConvProblem", "parse_descriptor", "read_batch_file", "run_check", "CheckResult", "assert_conv_close",
           "assert_conv_input_grad_close", "assert_conv_weight_grad_close", "__version__"]
