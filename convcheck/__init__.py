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

import os as _os

# A check alternates NumPy's OpenBLAS pool (the float64 reference) and torch's OpenMP pool
# (the convolution under test, the comparison) on the same cores. Each pool's threads keep
# spinning for a while after their call, so the other pool's threads wait for a core:
# measured on 2 cores, a resnet_50 sweep at batch 8 ran 3.0x its peer convolutions with the
# libraries' defaults and 1.5x with short spins. These take effect only when convcheck is
# imported before NumPy and torch (the command line always is) and never override a value
# the user set.
_os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # OpenBLAS: sleep after 2^4 cycles, not 2^28
_os.environ.setdefault("GOMP_SPINCOUNT", "0")  # libgomp (torch's OpenMP): yield the core at once

from ._moved import install as _install_moved  # noqa: E402

_install_moved()  # convcheck.sweep, convcheck.bound...: the module paths from before the layers, still importable

from .problem.descriptor import ConvProblem, parse_descriptor, read_batch_file  # noqa: E402
from .check.pipeline import CheckResult, run_check  # noqa: E402
from .api.assertions import assert_conv_close, assert_conv_input_grad_close, assert_conv_weight_grad_close  # noqa: E402
from .api.function_check import assert_conv_function, check_conv_function  # noqa: E402
from .check.pipeline import run_spec  # noqa: E402
from .check.spec import CheckSpec  # noqa: E402

__all__ = ["ConvProblem", "parse_descriptor", "read_batch_file", "run_check", "CheckResult", "assert_conv_close",
           "assert_conv_input_grad_close", "assert_conv_weight_grad_close", "check_conv_function",
           "assert_conv_function", "CheckSpec", "run_spec", "__version__"]
