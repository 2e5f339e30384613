"""The peers a check is measured against, timed in a process convcheck never touched.

Run as a script by the benchmarks (``python benchmarks/_peers.py PROBLEMS.json``): it imports torch and
NumPy only, reads the problems (shapes, stride, padding, dilation, groups, direction, type), and times
for each the two convolutions any check must run, on the problem's shapes with random inputs: torch's
convolution in the checked type and torch's float64 convolution. Each is timed cold (its first call,
set-up included) and warm (the best of three calls after it). It prints one JSON object: per problem
(cold, warm, warm in the checked type) seconds, torch's thread count and the machine's load.

Why a separate process: a library imported into the timing process can change how fast torch runs there
(thread pools' spin settings, environment variables read when a library loads), and the peer would
then be timed slower or faster than a user's own process runs it.
"""

from __future__ import annotations

import json
import os
import sys

from _timing import cold_and_warm  # this folder's: it imports nothing of convcheck


def _convolution(p: dict, dtype, device: str):
    """A function running the problem's convolution in ``dtype`` on random inputs of its shapes."""
    import torch
    import torch.nn.functional as F

    nd = len(p["kernel"])
    conv = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]
    gen = torch.Generator().manual_seed(0)

    def rand(shape):
        return (torch.rand(shape, generator=gen) * 2 - 1).to(device=device, dtype=dtype)

    # a negative back padding (rows never read) crops: F.pad takes negative widths
    pads = [v for pre, post in reversed(list(zip(p["pad_pre"], p["pad_post"]))) for v in (pre, post)]
    stride, dilation, groups = p["stride"], p["dilation"], p["groups"]
    x, w = rand(p["x_shape"]), rand(p["w_shape"])
    if p["direction"] == "fprop":
        return lambda: conv(F.pad(x, pads) if any(pads) else x, w, stride=stride, dilation=dilation, groups=groups)
    dy = rand(p["y_shape"])
    symmetric = p["pad_pre"] == p["pad_post"]
    grad = torch.nn.grad
    if p["direction"] == "dgrad" and symmetric:
        fn = (grad.conv1d_input, grad.conv2d_input, grad.conv3d_input)[nd - 1]
        return lambda: fn(p["x_shape"], w, dy, stride=stride, padding=p["pad_pre"], dilation=dilation, groups=groups)
    if p["direction"] == "wgrad" and symmetric:
        fn = (grad.conv1d_weight, grad.conv2d_weight, grad.conv3d_weight)[nd - 1]
        return lambda: fn(x, p["w_shape"], dy, stride=stride, padding=p["pad_pre"], dilation=dilation, groups=groups)

    def autograd():  # asymmetric padding: what torch's own autograd computes
        xx, ww = x.detach().requires_grad_(p["direction"] == "dgrad"), w.detach().requires_grad_(p["direction"] == "wgrad")
        y = conv(F.pad(xx, pads), ww, stride=stride, dilation=dilation, groups=groups)
        return torch.autograd.grad(y, xx if p["direction"] == "dgrad" else ww, dy)[0]

    return autograd


def main(path: str) -> int:
    import torch

    problems = json.loads(open(path, encoding="utf-8").read())
    device = "cuda" if problems and problems[0].get("device") == "cuda" else "cpu"
    storage = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    out = []
    for p in problems:
        cold = warm = checked = 0.0
        for dtype in (storage[p["dtype"]], torch.float64):
            run = _convolution(p, dtype, device)

            def timed():
                run()
                if device == "cuda":
                    torch.cuda.synchronize()
            first, best = cold_and_warm(timed, repeat=p.get("repeat", 3))
            cold, warm = cold + first, warm + best
            checked = checked or best
        out.append((cold, warm, checked))
    print(json.dumps({"peers": out, "threads": torch.get_num_threads(), "load": os.getloadavg(),
                      "convcheck_imported": "convcheck" in sys.modules}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
