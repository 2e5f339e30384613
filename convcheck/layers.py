"""convcheck's layers, bottom up, and the modules of each: a module imports from its own layer
and the layers below it, never from one above (tests/test_layers.py reads every import, the
ones inside functions too, and holds the code to it).

- **base**: the vocabulary every layer shares: errors, types, the inputs' container, array
  conversions, torch's math switches, memoisation.
- **problem**: what to compute: the convolution problem, its descriptors and the sources of
  problems (MIOpen lines, random problems, spaces, the lesson's files), and the convolution's
  own arithmetic (padding, torch's convolution of a problem in any dtype).
- **numerics**: the error model: the bounds (direct, staged, probable, Winograd, FFT) and the
  magnitudes they are built from. It learns about an implementation only through what it says
  it computes (:class:`convcheck.rounding.Computes`), never by importing it.
- **check**: one check: the implementations (backends), the planted bugs, the fill, the
  comparison, the environment, the spec, the error model's entry (:mod:`convcheck.judging`)
  and the pipeline (:mod:`convcheck.check`).
- **campaign**: many checks: workers, sweeps, records, rerun, diff, matrix, shrink, hunt, models.
- **output**: what a person or another machine reads: evidence text, standalone scripts, the HTML report.
- **api**: the Python asserts and function checks.
- **cli**: the command line and its options.
"""

from __future__ import annotations

LAYERS: dict[str, tuple[str, ...]] = {
    "base": ("errors", "dtypes", "layout", "targets", "copies", "memo", "stages", "inputs", "arrays", "math_mode"),
    "problem": ("problem", "convmath", "miopen", "random_problems", "space", "strategies", "lesson_io"),
    "numerics": ("rounding", "summation", "bound", "probable", "magnitudes", "winograd", "fft", "energy_kernels",
                 "fast_bound"),
    "check": ("backends", "backends.frontend_compat", "backends.cudnn_graph", "backends.im2col", "backends.numpy_ref",
              "backends.torch64", "backends.torch_conv", "backends.user_function", "plant", "winograd_plants",
              "fill", "compare", "verdict", "redzone", "environment", "memory", "spec", "judging", "check", "engines"),
    "campaign": ("workers", "records", "expectations", "sweep", "rerun", "diff", "matrix", "shrink", "hunt", "model"),
    "output": ("evidence", "repro", "report"),
    "api": ("assertions", "function_check"),
    "cli": ("options", "cli", "__main__", "__init__", "layers"),
}

ORDER = tuple(LAYERS)


def layer_of(module: str) -> str:
    """The layer of ``module`` (its name below ``convcheck``, e.g. ``backends.torch64``)."""
    for layer, modules in LAYERS.items():
        if module in modules:
            return layer
    raise KeyError(f"convcheck.{module} is in no layer of convcheck/layers.py: add it to the one it belongs to")
