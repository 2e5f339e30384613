"""TF32 switches: pin IEEE float32 on the torch side, and report what is set.

On Ampere and newer GPUs (the H200 is Hopper) torch may run an fp32 convolution
through cuDNN in TF32, which rounds the inputs to a 10-bit mantissa: a different
computation from the fp32 one being checked. ``torch.backends.cudnn.allow_tf32``
defaulted to True for years; newer torch spells it
``torch.backends.cudnn.conv.fp32_precision = "ieee" | "tf32"`` and refuses to
*read* the legacy flag once the two spellings disagree. So: set through the
legacy flag (which every torch since 1.7 has, and which sets conv and RNN alike),
read through whichever spelling exists, restore exactly what was there.
"""

from __future__ import annotations

import os
from contextlib import contextmanager


def _read(getter):
    try:
        return getter()
    except Exception as e:  # torch raises when legacy and new flags disagree
        return f"unreadable ({type(e).__name__})"


def torch_tf32_state() -> dict:
    """Every switch that decides whether torch's fp32 convolutions may use TF32."""
    import torch

    cudnn = torch.backends.cudnn
    state = {"torch.backends.cudnn.benchmark": _read(lambda: cudnn.benchmark)}
    conv = getattr(cudnn, "conv", None)
    if conv is not None and hasattr(conv, "fp32_precision"):
        # The legacy flag cannot be read once the new one is in use (torch raises).
        state["torch.backends.cudnn.conv.fp32_precision"] = _read(lambda: conv.fp32_precision)
    else:
        state["torch.backends.cudnn.allow_tf32"] = _read(lambda: cudnn.allow_tf32)
    state["torch.backends.cuda.matmul.allow_tf32"] = _read(lambda: torch.backends.cuda.matmul.allow_tf32)
    state["NVIDIA_TF32_OVERRIDE"] = os.environ.get("NVIDIA_TF32_OVERRIDE", "(unset)")
    return state


@contextmanager
def torch_conv_math(tf32: bool):
    """Inside: torch's cuDNN fp32 convolutions use TF32 exactly when ``tf32`` is true;
    cudnn.benchmark is off. A check of "fp32" pins IEEE; a check of "tf32" asks for TF32.

    With the new spelling, conv and RNN are set together ("ieee" or "tf32"); the
    legacy ``allow_tf32 = False`` is not used there because it sets them to "none"
    (inherit), not "ieee".
    """
    import torch

    cudnn = torch.backends.cudnn
    conv = getattr(cudnn, "conv", None)
    rnn = getattr(cudnn, "rnn", None)
    new_api = conv is not None and hasattr(conv, "fp32_precision") and hasattr(rnn, "fp32_precision")
    saved = (conv.fp32_precision, rnn.fp32_precision) if new_api else cudnn.allow_tf32
    saved_benchmark = cudnn.benchmark
    if new_api:
        conv.fp32_precision = rnn.fp32_precision = "tf32" if tf32 else "ieee"
    else:
        cudnn.allow_tf32 = bool(tf32)
    cudnn.benchmark = False
    try:
        yield
    finally:
        cudnn.benchmark = saved_benchmark
        if new_api:
            conv.fp32_precision, rnn.fp32_precision = saved
        else:
            cudnn.allow_tf32 = saved


@contextmanager
def cudnn_disabled():
    """Inside: torch does not call cuDNN (``torch.backends.cudnn.enabled = False``), restored after.
    Only this switch is touched (``torch.backends.cudnn.flags`` would also reset the TF32 and
    benchmark switches, which newer torch spells differently)."""
    import torch

    saved = torch.backends.cudnn.enabled
    torch.backends.cudnn.enabled = False
    try:
        yield
    finally:
        torch.backends.cudnn.enabled = saved
