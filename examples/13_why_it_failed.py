"""Why a convolution failed: the cause convcheck names, for four wrong answers of one problem.

A failed check tests a catalogue of known wrong arithmetic against the answer it judged (inputs
rounded to a narrower type, a narrow running sum, a flipped or transposed kernel, padding or
stride off by one, a layout misread, ...; convcheck.check.diagnose) and names the one that
explains it. Four answers, each wrong in its own way, each judged by `assert_conv_close`:

- computed from bf16-rounded inputs (what OpenVINO's default inference precision does on a CPU
  that has bf16, or a framework's bf16 autocast);
- with the kernel's height and width swapped (a transposed weight layout);
- with the running sum kept in bf16 between blocks of 8 input channels (a reduced-precision reduction);
- off by 1% at a few outputs: no known arithmetic, and the message says so.

Run:  python examples/13_why_it_failed.py
"""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from convcheck import assert_conv_close, parse_descriptor  # noqa: E402
from convcheck.check.backends.cudnn_graph import graph_text_or_why  # noqa: E402

PROBLEM = "mb2ic32ih12oc16oh12kh3ph1"


def bf16_inputs(x, w):
    return F.conv2d(x.bfloat16().float(), w.bfloat16().float(), padding=1)


def transposed_kernel(x, w):
    return F.conv2d(x, w.transpose(-1, -2), padding=1)


def bf16_running_sum(x, w, block=8):
    acc = None
    for c in range(0, x.shape[1], block):
        part = F.conv2d(x[:, c:c + block], w[:, c:c + block], padding=1)
        acc = (part if acc is None else acc + part).bfloat16().float()
    return acc


def a_few_outputs_off(x, w):
    y = F.conv2d(x, w, padding=1)
    y.view(-1)[::97] *= 1.01
    return y


def main() -> int:
    problem = parse_descriptor(PROBLEM)
    print(f"problem: {problem} (each answer below is one of this convolution, wrong in its own way)")
    print("the same convolution as a cuDNN graph:\n" + graph_text_or_why(problem))
    torch.manual_seed(0)
    x, w = torch.randn(2, 32, 12, 12), torch.randn(16, 32, 3, 3)
    for wrong in (bf16_inputs, transposed_kernel, bf16_running_sum, a_few_outputs_off):
        try:
            assert_conv_close(wrong(x, w), x, w, padding=1)
        except AssertionError as e:
            cause = next(line for line in str(e).splitlines() if line.startswith("Cause: "))
            print(f"\n{wrong.__name__}:\n  {cause}")
        else:
            print(f"\n{wrong.__name__}: passed (it should not have)")
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
