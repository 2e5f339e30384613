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

#: Each public name and the module it lives in. They are imported when first used (PEP 562), so that
#: ``import convcheck`` (and pytest loading convcheck's plugin in every suite of an environment that has
#: convcheck) costs nothing until a check is asked for.
_HOMES = {
    "ConvProblem": "problem.descriptor", "parse_descriptor": "problem.descriptor",
    "problem_from_torch": "problem.descriptor", "read_batch_file": "problem.descriptor",
    "CheckResult": "check.pipeline", "run_check": "check.pipeline", "run_spec": "check.pipeline",
    "CheckSpec": "check.spec",
    "assert_conv_close": "api.assertions", "assert_conv_input_grad_close": "api.assertions",
    "assert_conv_weight_grad_close": "api.assertions",
    "assert_conv_function": "api.function_check", "check_conv_function": "api.function_check",
    "Unsupported": "base.errors",
}

__all__ = [*_HOMES, "__version__"]


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'convcheck' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_HOMES))
