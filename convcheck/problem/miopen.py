"""MIOpenDriver command lines as problems (MIOpen ships its layer lists in this form).

    ./bin/MIOpenDriver convfp16 --batchsize 128 --spatial_dim 2 --in_channels 512 --in_h 7 --in_w 7
        --out_channels 512 --fil_h 3 --fil_w 3 --pad_h 1 --pad_w 1 --conv_stride_h 1 ... --forw 4

The flags and their defaults are MIOpen's own (driver/conv_driver.hpp, AddCmdLineArgs):
long ``--name value`` or short ``-x value``. The operation carries the dtype (``conv``
fp32, ``convfp16``, ``convbfp16``); ``--forw`` the directions (a bit mask: 1 forward, 2
backward data, 4 backward weights; 0 all three), so one line can be up to three problems.
MIOpen's convolution mode ``conv`` is cross-correlation (MIOpen computes cross-correlation
for what it calls convolution); ``--pad_mode same|valid`` is resolved by MIOpen's rule
(only where dilations or filter sizes are all 1, as MIOpen does). What convcheck cannot
represent is refused, naming the flag: transposed convolution (``--mode trans``), a
nonzero padding value, mixed tensor layouts, cast types, data files, other operations.
"""

from __future__ import annotations

import shlex

from ..base.errors import BadInput
from .descriptor import ConvProblem


class NotRepresentable(BadInput):
    """A well-formed line that asks for something convcheck does not check (recorded as unsupported)."""

#: operation -> dtype
OPERATIONS = {"conv": "fp32", "convfp16": "fp16", "convbfp16": "bf16"}
#: long name -> (short letter, default)
FLAGS = {
    "spatial_dim": ("_", "2"), "forw": ("F", "0"), "batchsize": ("n", "100"), "in_channels": ("c", "3"),
    "in_d": ("!", "32"), "in_h": ("H", "32"), "in_w": ("W", "32"), "out_channels": ("k", "32"),
    "fil_d": ("@", "3"), "fil_h": ("y", "3"), "fil_w": ("x", "3"),
    "conv_stride_d": ("#", "1"), "conv_stride_h": ("u", "1"), "conv_stride_w": ("v", "1"),
    "pad_d": ("$", "0"), "pad_h": ("p", "0"), "pad_w": ("q", "0"), "pad_val": ("r", "0"),
    "trans_output_pad_d": ("%", "0"), "trans_output_pad_h": ("Y", "0"), "trans_output_pad_w": ("X", "0"),
    "dilation_d": ("^", "1"), "dilation_h": ("l", "1"), "dilation_w": ("j", "1"), "group_count": ("g", "1"),
    "mode": ("m", "conv"), "pad_mode": ("z", "default"), "bias": ("b", "0"),
    "in_layout": ("I", ""), "out_layout": ("O", ""), "fil_layout": ("f", ""),
    "tensor_vect": ("Z", "0"), "vector_length": ("L", "1"),
    "in_cast_type": ("U", "-1"), "out_cast_type": ("T", "-1"), "wei_cast_type": ("R", "-1"),
    "in_data": ("d", ""), "weights": ("e", ""), "in_bias": ("a", ""), "dout_data": ("D", ""),
    # how the driver runs, not what it computes: accepted and ignored
    "iter": ("i", "10"), "verify": ("V", "1"), "verification_cache": ("C", ""), "time": ("t", "0"),
    "wall": ("w", "0"), "search": ("s", "0"), "printconv": ("P", "1"), "dump_output": ("o", "0"),
    "solution": ("S", "-1"), "gpualloc": ("G", "0"),
}
_SHORT = {short: name for name, (short, _) in FLAGS.items()}
DIRECTION_BITS = ((1, "fprop"), (2, "dgrad"), (4, "wgrad"))


def is_miopen_line(line: str) -> bool:
    return "MIOpenDriver" in line.split("#", 1)[0]


def _flags(tokens: list[str], where: str) -> dict:
    values = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("--"):
            name, eq, value = tok[2:].partition("=")
            if name not in FLAGS:
                raise BadInput(f"{where}: unknown MIOpenDriver flag --{name}")
        elif tok.startswith("-") and len(tok) >= 2:
            name, eq, value = _SHORT.get(tok[1]), "=" if len(tok) > 2 else "", tok[2:]
            if name is None:
                raise BadInput(f"{where}: unknown MIOpenDriver flag {tok}")
        else:
            raise BadInput(f"{where}: expected a flag, got {tok!r}")
        if not eq:
            if i + 1 >= len(tokens):
                raise BadInput(f"{where}: flag {tok} has no value")
            value = tokens[i + 1]
            i += 1
        values[name] = value
        i += 1
    return values


def parse_miopen_line(line: str, where: str = "MIOpenDriver line", mb: int | None = None, **overrides) -> list[ConvProblem]:
    """The problems (one per direction of ``--forw``) of one MIOpenDriver command line."""
    try:
        tokens = shlex.split(line.split("#", 1)[0])
    except ValueError as e:
        raise BadInput(f"{where}: {e}") from None
    at = next((i for i, t in enumerate(tokens) if t.endswith("MIOpenDriver")), None)
    if at is None or at + 1 >= len(tokens):
        raise BadInput(f"{where}: expected 'MIOpenDriver OPERATION --flag value ...'")
    op = tokens[at + 1]
    if op not in OPERATIONS:
        raise BadInput(f"{where}: operation {op!r} is not a convolution convcheck checks; expected one of "
                       f"{', '.join(OPERATIONS)}")
    given = _flags(tokens[at + 2:], where)
    flags = {name: given.get(name, default) for name, (_, default) in FLAGS.items()}

    def num(name: str) -> int:
        try:
            return int(flags[name])
        except ValueError:
            raise BadInput(f"{where}: --{name} {flags[name]!r} is not an integer") from None

    if flags["mode"] != "conv":
        raise NotRepresentable(f"{where}: --mode {flags['mode']} (transposed convolution) is not checked by convcheck; "
                       "only --mode conv (cross-correlation)")
    if num("pad_val") != 0:
        raise NotRepresentable(f"{where}: --pad_val {flags['pad_val']}: convcheck checks zero padding only")
    for name in ("in_data", "weights", "in_bias", "dout_data"):
        if flags[name]:
            raise NotRepresentable(f"{where}: --{name} reads data from a file; convcheck draws its own inputs")
    for name in ("in_cast_type", "out_cast_type", "wei_cast_type"):
        if flags[name] not in ("-1", ""):
            raise NotRepresentable(f"{where}: --{name} {flags[name]}: cast tensors are not checked by convcheck")
    if num("tensor_vect") != 0 or num("vector_length") != 1:
        raise NotRepresentable(f"{where}: --tensor_vect/--vector_length: vectorized tensors are not checked by convcheck")
    layouts = {flags[k].upper() for k in ("in_layout", "out_layout", "fil_layout") if flags[k]}
    if len(layouts) > 1:
        raise NotRepresentable(f"{where}: --in_layout/--out_layout/--fil_layout differ ({', '.join(sorted(layouts))}); "
                       "convcheck checks one layout for all tensors")
    layout = "nxc" if layouts & {"NHWC", "NDHWC", "NWC"} else "ncx"
    if layouts - {"NCHW", "NHWC", "NCDHW", "NDHWC", "NCW", "NWC"}:
        raise NotRepresentable(f"{where}: layout {layouts.pop()} is not one convcheck checks")
    nd = num("spatial_dim")
    if nd not in (2, 3):
        raise BadInput(f"{where}: --spatial_dim {nd}: MIOpenDriver convolutions are 2-D or 3-D")
    axes = ("d", "h", "w")[3 - nd:]
    size = tuple(num(f"in_{a}") for a in axes)
    kernel = tuple(num(f"fil_{a}") for a in axes)
    stride = tuple(num(f"conv_stride_{a}") for a in axes)
    dilation = tuple(num(f"dilation_{a}") for a in axes)
    pads = [num(f"pad_{a}") for a in axes]
    if flags["pad_mode"] not in ("default", "same", "valid"):
        raise BadInput(f"{where}: --pad_mode {flags['pad_mode']}; expected default, same or valid")
    if all(d == 1 for d in dilation) or all(k == 1 for k in kernel):  # MIOpen's own condition
        if flags["pad_mode"] == "same":
            pads = [max(k - (s if i % s == 0 else i % s), 0) // 2 for i, k, s in zip(size, kernel, stride)]
        elif flags["pad_mode"] == "valid":
            pads = [0] * nd
    forw = num("forw")
    if not 0 <= forw <= 7:
        raise BadInput(f"{where}: --forw {forw}; expected a mask of 1 (forward), 2 (backward data), 4 (backward weights), or 0")
    directions = [d for bit, d in DIRECTION_BITS if forw == 0 or forw & bit]
    bias = num("bias") != 0
    fixed = {k: v for k, v in overrides.items() if v not in (None, ()) and k not in ("dtype", "direction")}
    problems = []
    for direction in directions:
        try:
            p = ConvProblem(mb=mb or num("batchsize"), ic=num("in_channels"), oc=num("out_channels"), input=size,
                            kernel=kernel, stride=stride, pad_pre=tuple(pads), pad_post=tuple(pads), dilation=dilation,
                            groups=max(num("group_count"), 1), dtype=OPERATIONS[op], direction=direction, layout=layout,
                            fuse=("bias",) if bias and direction == "fprop" else ())
            problems.append(p.with_(**fixed) if fixed else p)
        except BadInput as e:
            raise BadInput(f"{where}: {e}") from None
    return problems
