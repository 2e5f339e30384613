"""convcheck: does a cuDNN convolution compute the right answer? With evidence.

Library entry points::

    from convcheck import parse_descriptor, run_check
    result = run_check(parse_descriptor("mb2ic16ih14oc8oh14kh3ph1"))
    print(result.status, result.comparison.max_abs_diff)

    from convcheck import assert_conv_function       # your own convolution function: convcheck
    assert_conv_function(my_conv2d, dims=(2,))       # chooses the problems and the inputs

    from convcheck import assert_conv_close          # an output you computed, on your own data
    assert_conv_close(my_conv(x, w), x, w, padding=1)
"""

__version__ = "0.1.0"

from .problem.descriptor import ConvProblem, parse_descriptor, read_batch_file
from .check.pipeline import CheckResult, run_check
from .api.assertions import assert_conv_close, assert_conv_input_grad_close, assert_conv_weight_grad_close
from .api.function_check import assert_conv_function, check_conv_function
from .check.pipeline import run_spec
from .check.spec import CheckSpec
from .base.errors import Unsupported

__all__ = ["ConvProblem", "parse_descriptor", "read_batch_file", "run_check", "CheckResult", "assert_conv_close",
           "assert_conv_input_grad_close", "assert_conv_weight_grad_close", "check_conv_function",
           "assert_conv_function", "CheckSpec", "run_spec", "Unsupported", "__version__"]
