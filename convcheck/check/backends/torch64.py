"""torch's own convolution in float64 with cuDNN switched off: the reference on a GPU.

Why not torch's ordinary convolution? On a GPU, ``torch.nn.functional.conv2d`` calls
cuDNN, and on a machine where the frontend and torch load the same ``libcudnn.so.9``
file the "reference" is then the library under test: the first H200 run saw the two
agree bit for bit in 402 of 420 checks, which proves nothing about a cuDNN engine bug
that torch's heuristic also picks. With ``torch.backends.cudnn.enabled = False`` torch
runs its native kernels instead (im2col/col2im + a cuBLAS or CPU BLAS GEMM, its own
depthwise and dilated kernels, a slow 3-D path), none of which is cuDNN; in float64
their rounding (about 1e-16 relative to conv(|x|,|w|)) is far below any fp32 error.

The inputs are taken as the storage type holds them (an fp16 check's reference starts
from the fp16 values) and computed in float64, in plain NCHW: memory layout changes no
value, and the contiguous layout is what the native kernels are written for. On the CPU
this is the same float64 arithmetic through torch's CPU kernels (cuDNN never runs there).
"""

from __future__ import annotations


from ...base import dtypes
from ...base.math_mode import cudnn_disabled
from ...problem.descriptor import ConvProblem
from . import torch_conv

name = "torch64"
#: What it is, where it runs, what it is checked against by default, and which recorded
#: version names it (convcheck.check.backends.facts reads these).
label = "torch.nn.functional.conv in float64, cuDNN disabled"
devices = ("cpu", "cuda")
default_reference = "numpy"
version_key = "torch"
#: Its answer is a float64 computation (the bound gives it float64's rounding, not fp32's).
float64 = True


def unavailable_reason(device: str) -> str | None:
    return torch_conv.unavailable_reason(device)


def as_float64(a, device: str, storage=None):
    """``a`` (NumPy, torch or CuPy, any device) as a contiguous float64 torch tensor on ``device``,
    first rounded to the check's ``storage`` type when one is given (what the run under test read)."""
    import torch

    from ...base.arrays import to_torch

    if a is None:
        return None
    t = to_torch(a).detach().to(device=device)
    if storage is not None and t.dtype != storage:
        t = t.to(storage)
    return t.to(torch.float64).contiguous()


def compute(problem: ConvProblem, x, w, dy=None, bias=None):
    """The problem's result (y with its fusion, dx or dw) from float64 torch tensors, with cuDNN
    off: (result, the call that ran)."""
    with cudnn_disabled():
        result, how = torch_conv.compute(problem, x, w, dy, bias)
    return result, f"{how} in float64, cuDNN disabled"


def run(problem: ConvProblem, inputs, device: str = "cpu"):
    """Returns (float64 torch tensor on ``device``, info dict)."""
    import torch

    storage = dtypes.torch_dtype(problem.dtype)
    x, w, dy, bias = (as_float64(a, device, storage) for a in (inputs.x, inputs.w, inputs.dy, inputs.bias))
    y, how = compute(problem, x, w, dy, bias)
    return y, {
        "implementation": how,
        "device": str(y.device),
        "dtype": "float64",
        "accumulate": "float64",
        "cudnn": "disabled (torch.backends.cudnn.enabled = False): torch's native kernels",
        "inputs": f"{str(storage).replace('torch.', '')} values, widened to float64",
        "torch": torch.__version__,
    }
