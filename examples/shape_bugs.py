"""Five convolutions with bugs that only some shapes show, and what `convcheck hunt` makes of them.

Each function has torch's signature (`torch.nn.functional.conv2d`; 1-D, 2-D and 3-D) and is
torch's own convolution except on the shapes its bug needs, the way real kernel bugs hide
in one tile size, one stride or one padding path:

- `odd_width_stride2`: the last output column is off by 0.01 when the output width is odd
  and the stride along the width is 2 (a vectorised loop that writes columns in pairs);
- `odd_group_channels`: off by 0.01 when there are groups and each has an odd number of input
  channels (a grouped kernel that assumes pairs of channels);
- `dilated_padding`: when the kernel is dilated and padded along the height, the padding is
  applied one row too low (the row loop's window origin computed without the dilation);
- `big_batch`: off by 0.001 everywhere once the batch is larger than 4 (a second code path
  for large batches);
- `wide`: segfaults when the input is wider than 100 (a fixed-size row buffer);

and `shifted_padding`, whose padding is one row/column too low on every padded axis (the
function the bundled lists are measured with: every layer that reads padding fails).

    convcheck hunt --backend examples/shape_bugs.py:all_five --space "mb1-16 g1-4 ic1-16 oc1-16 ih1-32 iw1-128 kh1-3 kw1-3 sh1-2 sw1-2 ph0-2 pw0-2 dh0-1 dw0-1" --budget 300 --out hunt.jsonl
    convcheck hunt --backend examples/shape_bugs.py:odd_width_stride2 --around cases/benchdnn/shapes_resnet_50 --mb 8-32 --budget 300 --out hunt.jsonl

Run:  python examples/shape_bugs.py      (a short hunt of `odd_width_stride2` over a space of
      3e10 problems: the failure it found, shrunk, and its standalone script)
"""

import ctypes
import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

OFF = 0.01


def _conv(input, weight, bias, stride, padding, dilation, groups):
    fn = (F.conv1d, F.conv2d, F.conv3d)[input.dim() - 3]
    return fn(input, weight, bias, stride, padding, dilation, groups)


def _per_axis(value, n: int) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


def _shifted(input, weight, bias, stride, padding, dilation, groups, axes):
    """The convolution with the padding of each of ``axes`` one row later: p+1 before, p-1 after."""
    n = input.dim() - 2
    pads = list(_per_axis(padding, n))
    amounts = []
    for a in reversed(range(n)):  # F.pad: last axis first
        p = pads[a]
        amounts += [p + 1, p - 1] if a in axes and p > 0 else [p, p]
    return _conv(F.pad(input, amounts), weight, bias, stride, 0, dilation, groups)


def _odd_width_stride2(y, input, stride, groups):
    if _per_axis(stride, input.dim() - 2)[-1] == 2 and y.shape[-1] % 2 == 1:
        y = y.clone()
        y[..., -1] += OFF
    return y


def _odd_group_channels(y, input, stride, groups):
    return y + OFF if groups > 1 and (input.shape[1] // groups) % 2 == 1 else y


def _big_batch(y, input, stride, groups):
    return y + 1e-3 if input.shape[0] > 4 else y


def _wide(input):
    if input.shape[-1] > 100 and not os.environ.get("CRASHERS_OFF"):
        ctypes.string_at(0)  # a segfault: convcheck's worker dies, the hunt goes on


def _dilated_padding(input, weight, bias, stride, padding, dilation, groups):
    n = input.dim() - 2
    rows = 0 if n == 1 else n - 2  # the height (the only axis of 1-D)
    if _per_axis(dilation, n)[rows] > 1 and _per_axis(padding, n)[rows] > 0:
        return _shifted(input, weight, bias, stride, padding, dilation, groups, {rows})
    return _conv(input, weight, bias, stride, padding, dilation, groups)


def odd_width_stride2(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _odd_width_stride2(_conv(input, weight, bias, stride, padding, dilation, groups), input, stride, groups)


def odd_group_channels(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _odd_group_channels(_conv(input, weight, bias, stride, padding, dilation, groups), input, stride, groups)


def dilated_padding(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _dilated_padding(input, weight, bias, stride, padding, dilation, groups)


def big_batch(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _big_batch(_conv(input, weight, bias, stride, padding, dilation, groups), input, stride, groups)


def wide(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    _wide(input)
    return _conv(input, weight, bias, stride, padding, dilation, groups)


def shifted_padding(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _shifted(input, weight, bias, stride, padding, dilation, groups, set(range(input.dim() - 2)))


def all_five(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """Every bug above at once, each where its shapes are (the crash first)."""
    _wide(input)
    y = _dilated_padding(input, weight, bias, stride, padding, dilation, groups)
    for bug in (_big_batch, _odd_group_channels, _odd_width_stride2):
        y = bug(y, input, stride, groups)
    return y


#: 2-D, up to 16 images and channels, widths to 128: 3e10 combinations, each a check of a few ms
SPACE = "mb1-16 g1-4 ic1-16 oc1-16 ih1-32 iw1-128 kh1-3 kw1-3 sh1-2 sw1-2 ph0-2 pw0-2 dh0-1 dw0-1"


def main() -> int:
    """A short hunt of one bug (odd_width_stride2): the failure, shrunk, and its script."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import tempfile

    from convcheck.check.backends.cudnn_graph import graph_text_or_why
    from convcheck.campaign.hunt import format_groups, hunt
    from convcheck.problem.space import parse_space
    from convcheck.campaign.sweep import SweepOptions, resolved

    space = parse_space(SPACE)
    out = Path(tempfile.mkdtemp()) / "hunt.jsonl"
    options = resolved(SweepOptions(backend=f"{Path(__file__).resolve()}:odd_width_stride2", device="cpu"))
    result = hunt(space, options, out, budget=int(os.environ.get("HUNT_BUDGET", "80")), seed=1,
                  scripts=out.with_name("scripts"), log=lambda line: print(line, file=sys.stderr))
    print(format_groups(result, out))
    if result.groups:
        from convcheck import parse_descriptor

        smallest = parse_descriptor(result.groups[0].minimal["problem"])
        print(f"problem: {smallest} (the smallest that shows the bug; its script: {result.groups[0].script})")
        print("what cuDNN would be asked for it, as a graph:\n" + graph_text_or_why(smallest))
    print("all five at once: convcheck hunt --backend examples/shape_bugs.py:all_five "
          f'--space "{SPACE}" --budget 300 --out hunt.jsonl')
    return 0


if __name__ == "__main__":
    sys.exit(main())
