"""What to compute: one convolution problem, and oneDNN benchdnn's descriptor for it.

A :class:`ConvProblem` is pure data. It knows its tensor shapes, its output size,
its accumulation depth and how to print itself as a benchdnn descriptor; it
knows nothing of any library that computes it.

Conventions, fixed once here so no backend has to guess:

* Spatial tuples are ordered outermost first: ``(w,)`` for 1-D, ``(h, w)`` for
  2-D, ``(d, h, w)`` for 3-D.
* ``dilation`` is torch's (1 = none). benchdnn's descriptor counts *extra* gaps
  (``dh0`` = none), so the descriptor value is ``dilation - 1``.
* ``pad_pre`` is the front/top/left padding, ``pad_post`` the back/bottom/right.
  ``pad_post`` may be negative: the last ``-pad_post`` input rows are then never
  read (benchdnn deduces such problems from an output size; they are valid).
* The output size uses floor division, ``(i + pre + post - eff) // s + 1`` with
  ``eff = (k - 1) * dilation + 1``, which is what cuDNN and torch compute.
"""

from __future__ import annotations

import json
import math
import re
from functools import cached_property
from dataclasses import dataclass, replace

from ..base.errors import BadInput

MODES = ("xcorr", "conv")
DTYPES = ("fp32", "tf32", "fp16", "bf16")
DIRECTIONS = ("fprop", "dgrad", "wgrad")
#: Activations a fused conv + bias + activation graph may end with (cuDNN pointwise modes).
ACTIVATIONS = ("relu", "leaky_relu", "gelu", "gelu_tanh", "sigmoid", "tanh")
FUSIONS = ("bias",) + ACTIVATIONS
LAYOUTS = ("ncx", "nxc")  # channels first (NCHW...) / channels last (NHWC...)

_AXES = ("d", "h", "w")

_LAYOUT_NAMES = {
    "ncx": "ncx", "nchw": "ncx", "ncw": "ncx", "ncdhw": "ncx", "channels_first": "ncx",
    "nxc": "nxc", "nhwc": "nxc", "nwc": "nxc", "ndhwc": "nxc", "channels_last": "nxc",
}


def layout_from_name(name: str) -> str:
    """'nchw'/'ncw'/'ncdhw' -> 'ncx' (channels first); 'nhwc'/'nwc'/'ndhwc' -> 'nxc' (channels last)."""
    try:
        return _LAYOUT_NAMES[name.lower()]
    except KeyError:
        raise BadInput(f"unknown layout {name!r}; expected nchw (channels first) or nhwc (channels last)") from None


def _as_tuple(value, ndim: int, what: str) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * ndim
    out = tuple(value)
    if len(out) != ndim:
        raise BadInput(f"{what} has {len(out)} values {out}, expected {ndim} (one per spatial axis)")
    return out


@dataclass(frozen=True)
class ConvProblem:
    """One convolution. Build it directly (flags) or with :func:`parse_descriptor`.

    ``input``, ``kernel``, ``stride``, ``pad_pre``, ``pad_post`` and ``dilation``
    are spatial tuples of equal length (1, 2 or 3). ``ic``/``oc`` are the total
    channel counts; with ``groups`` g the filter is ``[oc, ic/g, *kernel]``.
    """

    mb: int
    ic: int
    oc: int
    input: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...] = ()
    pad_pre: tuple[int, ...] = ()
    pad_post: tuple[int, ...] = ()
    dilation: tuple[int, ...] = ()
    groups: int = 1
    mode: str = "xcorr"
    dtype: str = "fp32"
    direction: str = "fprop"
    layout: str = "ncx"
    name: str = ""
    fuse: tuple[str, ...] = ()

    def __post_init__(self):
        inp = tuple(self.input) if not isinstance(self.input, int) else (self.input,)
        ndim = len(inp)
        object.__setattr__(self, "input", inp)
        for attr, default in (("kernel", None), ("stride", 1), ("pad_pre", 0), ("pad_post", None), ("dilation", 1)):
            value = getattr(self, attr)
            if value == () or value is None:
                if attr == "pad_post":
                    value = self.pad_pre
                elif default is None:
                    raise BadInput(f"{attr} is required")
                else:
                    value = default
            object.__setattr__(self, attr, _as_tuple(value, ndim, attr))
        self._validate()

    # ----------------------------------------------------------------- checks
    def _validate(self) -> None:
        ndim = self.ndim
        if ndim not in (1, 2, 3):
            raise BadInput(f"a convolution has 1, 2 or 3 spatial axes; got input {self.input}")
        for attr in ("mb", "ic", "oc", "groups"):
            v = getattr(self, attr)
            if not isinstance(v, int) or v <= 0:
                raise BadInput(f"{attr} must be a positive integer, got {v!r}")
        for attr in ("input", "kernel", "stride", "dilation"):
            for v in getattr(self, attr):
                if not isinstance(v, int) or v <= 0:
                    raise BadInput(f"{attr} must be positive integers, got {getattr(self, attr)}")
        for v in self.pad_pre:
            if not isinstance(v, int) or v < 0:
                raise BadInput(f"pad_pre must be non-negative integers, got {self.pad_pre}")
        if self.ic % self.groups or self.oc % self.groups:
            raise BadInput(f"channels not divisible by groups: ic={self.ic}, oc={self.oc}, groups={self.groups}")
        for axis, i, post in zip(self.axis_names, self.input, self.pad_post):
            if not isinstance(post, int) or i + post < 1:
                raise BadInput(
                    f"back padding p{axis}_r={post} crops away the whole input (i{axis}={i}); "
                    f"the output size is inconsistent with the input"
                )
        for axis, o in zip(self.axis_names, self.output):
            if o <= 0:
                raise BadInput(f"output size o{axis}={o} <= 0: the kernel does not fit the padded input ({self.describe_axis(axis)})")
        for axis, o, s, eff, pre in zip(self.axis_names, self.output, self.stride, self.effective_kernel, self.pad_pre):
            if (o - 1) * s + eff <= pre:
                raise BadInput(
                    f"every window along {axis} lies in the front padding, so the input is never read "
                    f"({self.describe_axis(axis)})"
                )
        if self.mode not in MODES:
            raise BadInput(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.dtype not in DTYPES:
            raise BadInput(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        if self.direction not in DIRECTIONS:
            raise BadInput(f"direction must be one of {DIRECTIONS}, got {self.direction!r}")
        if self.layout not in LAYOUTS:
            raise BadInput(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        object.__setattr__(self, "fuse", tuple(self.fuse))
        for op in self.fuse:
            if op not in FUSIONS:
                raise BadInput(f"unknown fusion {op!r}; expected bias and/or one of {', '.join(ACTIVATIONS)}")
        if self.fuse and self.direction != "fprop":
            raise BadInput("fusions (bias, activations) apply to the forward direction only")
        if len([op for op in self.fuse if op in ACTIVATIONS]) > 1 or self.fuse.count("bias") > 1:
            raise BadInput(f"at most one bias and one activation can be fused, got {','.join(self.fuse)}")
        if "bias" in self.fuse and self.fuse[0] != "bias":
            raise BadInput("the bias comes before the activation: bias,relu", option="fuse")

    def describe_axis(self, axis: str) -> str:
        j = self.axis_names.index(axis)
        return (
            f"i{axis}={self.input[j]} k{axis}={self.kernel[j]} s{axis}={self.stride[j]} "
            f"p{axis}={self.pad_pre[j]}/{self.pad_post[j]} dilation={self.dilation[j]}"
        )

    # ------------------------------------------------------------ derived facts
    # (computed once per problem: a problem is immutable, and a check asks them many times)
    @cached_property
    def ndim(self) -> int:
        """Number of spatial axes."""
        return len(self.input)

    @cached_property
    def axis_names(self) -> tuple[str, ...]:
        return _AXES[3 - self.ndim:]

    @cached_property
    def effective_kernel(self) -> tuple[int, ...]:
        return tuple((k - 1) * d + 1 for k, d in zip(self.kernel, self.dilation))

    @cached_property
    def output(self) -> tuple[int, ...]:
        return tuple(
            (i + pre + post - eff) // s + 1
            for i, pre, post, eff, s in zip(self.input, self.pad_pre, self.pad_post, self.effective_kernel, self.stride)
        )

    @cached_property
    def x_shape(self) -> tuple[int, ...]:
        """Logical input dims, always N, C, spatial (the layout is a stride matter)."""
        return (self.mb, self.ic, *self.input)

    @cached_property
    def w_shape(self) -> tuple[int, ...]:
        return (self.oc, self.ic // self.groups, *self.kernel)

    @cached_property
    def y_shape(self) -> tuple[int, ...]:
        return (self.mb, self.oc, *self.output)

    @cached_property
    def result_shape(self) -> tuple[int, ...]:
        """What the operation produces: y for fprop, dx for dgrad, dw for wgrad."""
        return {"fprop": self.y_shape, "dgrad": self.x_shape, "wgrad": self.w_shape}[self.direction]

    @cached_property
    def activation(self) -> str | None:
        return next((op for op in self.fuse if op in ACTIVATIONS), None)

    @cached_property
    def accumulation_depth(self) -> int:
        """Products summed into one result element (DESIGN.md 3): fprop (C/g)*prod(kernel);
        dgrad (K/g)*prod(kernel), an upper bound since padding and stride drop some;
        wgrad N*prod(output spatial)."""
        if self.direction == "dgrad":
            return (self.oc // self.groups) * math.prod(self.kernel)
        if self.direction == "wgrad":
            return self.mb * math.prod(self.output)
        return (self.ic // self.groups) * math.prod(self.kernel)

    @cached_property
    def cropped_input(self) -> tuple[int, ...]:
        """Input extent actually read: a negative back padding crops it, zero padding does not."""
        return tuple(i + min(post, 0) for i, post in zip(self.input, self.pad_post))

    @cached_property
    def nonnegative_pad_post(self) -> tuple[int, ...]:
        """Back padding to use on the cropped input (see :attr:`cropped_input`)."""
        return tuple(max(post, 0) for post in self.pad_post)

    @cached_property
    def reads_input(self) -> bool:
        """False when along some axis no tap of any output lands on an input element
        (all in padding, or skipped over by stride and dilation): the output is then
        identically zero whatever the data, and no check of it proves anything."""
        for o, s, d, k, pre, i in zip(self.output, self.stride, self.dilation, self.kernel, self.pad_pre, self.cropped_input):
            if not any(0 <= oo * s + t * d - pre < i for oo in range(o) for t in range(k)):
                return False
        return True

    @cached_property
    def layout_name(self) -> str:
        """NCW/NCHW/NCDHW or NWC/NHWC/NDHWC."""
        sp = "".join(a.upper() for a in self.axis_names)
        return f"NC{sp}" if self.layout == "ncx" else f"N{sp}C"

    def with_(self, **changes) -> "ConvProblem":
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def canonical(self) -> "ConvProblem":
        """The same computation with the back padding that benchdnn deduces.

        Several back paddings give the same output when the stride does not
        divide evenly; the deduced one is the smallest. Two problems compute the
        same thing exactly when their canonical forms are equal.
        """
        post = tuple(
            (o - 1) * s + eff - (i + pre)
            for o, s, eff, i, pre in zip(self.output, self.stride, self.effective_kernel, self.input, self.pad_pre)
        )
        return replace(self, pad_post=post)

    # -------------------------------------------------------------- descriptor
    def descriptor(self, with_mb: bool = True) -> str:
        """Canonical benchdnn descriptor: every entry explicit, so parsing it back
        gives :meth:`canonical` (name, mode, dtype and layout are not part of it)."""
        return self._descriptor if with_mb else self._written(False)

    @cached_property
    def _descriptor(self) -> str:
        return self._written(True)

    def _written(self, with_mb: bool) -> str:
        parts = []
        if self.groups != 1:
            parts.append(f"g{self.groups}")
        if with_mb:
            parts.append(f"mb{self.mb}")
        parts.append(f"ic{self.ic}")
        parts += [f"i{a}{v}" for a, v in zip(self.axis_names, self.input)]
        parts.append(f"oc{self.oc}")
        parts += [f"o{a}{v}" for a, v in zip(self.axis_names, self.output)]
        parts += [f"k{a}{v}" for a, v in zip(self.axis_names, self.kernel)]
        parts += [f"s{a}{v}" for a, v in zip(self.axis_names, self.stride)]
        parts += [f"p{a}{v}" for a, v in zip(self.axis_names, self.pad_pre)]
        parts += [f"d{a}{v - 1}" for a, v in zip(self.axis_names, self.dilation)]
        text = "".join(parts)
        if self.name:
            text += f'n"{self.name}"'
        return text

    def __str__(self) -> str:
        extra = []
        if self.mode != "xcorr":
            extra.append(f"mode={self.mode}")
        if self.dtype != "fp32":
            extra.append(f"dtype={self.dtype}")
        if self.layout != "ncx":
            extra.append(f"layout={self.layout_name}")
        if self.direction != "fprop":
            extra.append(f"direction={self.direction}")
        if self.fuse:
            extra.append(f"fuse={','.join(self.fuse)}")
        return self.descriptor() + (f" ({', '.join(extra)})" if extra else "")


# ---------------------------------------------------------------------------
# benchdnn descriptor parsing (oneDNN tests/benchdnn/conv/conv_aux.cpp, str2desc)
# ---------------------------------------------------------------------------

_KEYS = ("mb", "ic", "oc") + tuple(p + a for p in "iokspd" for a in _AXES) + ("g",)
_TOKEN = re.compile(r"(mb|ic|oc|i[dhw]|o[dhw]|k[dhw]|s[dhw]|p[dhw]|d[dhw]|g)(-?\d+)")
#: The largest value a descriptor's entry takes: what the libraries' int32 sizes hold.
LARGEST = 2 ** 31 - 1


def _shown(text: str, most: int = 60) -> str:
    """A descriptor as a message quotes it: its repr, cut to ``most`` characters."""
    return repr(text) if len(text) <= most else repr(text[:most]) + f" (and {len(text) - most} more characters)"


def _c_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as benchdnn's C++ does."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _split_name(text: str) -> tuple[str, str]:
    """Separate the name from the entries: ``n"name"`` or ``nname`` to the end.

    No entry key contains the letter n, so the first ``n`` starts the name."""
    i = text.find("n")
    if i < 0:
        return text, ""
    name = text[i + 1:]
    if name.startswith('"'):
        name = name[1:].split('"', 1)[0]
    return text[:i], name


def parse_descriptor(text: str, **overrides) -> ConvProblem:
    """Parse one benchdnn convolution descriptor, e.g. ``mb2ic16ih28oc32oh28kh3ph1``.

    Rules (DESIGN.md 4): ``_`` separates nothing; g=1, mb=2, strides 1 and
    dilation 0 (none) by default; missing w copies h, missing h copies d; no
    ``xd`` means at most 2-D, no ``xd``/``xh`` means 1-D; a missing output size
    is computed with symmetric padding, a missing padding is deduced from the
    output size, and the back padding is whatever makes the output size come
    out (possibly negative, possibly larger than the front padding).
    ``overrides`` replace fields afterwards (``mb=1``, ``mode="conv"``...).
    Raises :class:`BadInput` naming the offending entry.
    """
    original = text
    text = text.split("#", 1)[0].strip()
    if not text:
        raise BadInput(f"empty descriptor {original!r}")
    body, name = _split_name(text)
    if "n" in text and not name:
        raise BadInput(f"descriptor {original!r}: 'n' starts a name but none follows; write n\"name\" or leave it out")
    # '_' and spaces separate nothing; a mistake is quoted from the text as the user wrote it
    written, body = body, body.replace("_", "").replace(" ", "")

    def unknown(pos: int) -> BadInput:
        at = [i for i, ch in enumerate(written) if ch not in "_ "][pos]
        rest = written[at:]
        bad = re.match(r"[a-zA-Z]*-?\d*", rest).group(0) or rest[:1]
        return BadInput(f"descriptor {original!r}: unknown entry {bad!r} at position {at}; "
                        f"expected one of {', '.join(_KEYS)} followed by a number, or n\"name\"")

    values: dict[str, int] = {}
    pos = 0
    for m in _TOKEN.finditer(body):
        if m.start() != pos:  # something no entry matches lies before this one
            raise unknown(pos)
        key, digits = m.group(1), m.group(2)
        if len(digits.lstrip("-")) > len(str(LARGEST)) or abs(int(digits)) > LARGEST:  # before int() of 5000 digits
            raise BadInput(f"descriptor {_shown(original)}: entry '{key}{digits[:12]}{'...' if len(digits) > 12 else ''}' "
                           f"is too large; every size, stride, padding and dilation is at most {LARGEST}")
        num = int(digits)
        if num < 0:
            raise BadInput(f"descriptor {original!r}: entry '{key}{num}' is negative; sizes, strides, paddings and dilations are >= 0")
        if key in values:
            raise BadInput(f"descriptor {original!r}: entry '{key}' is given twice ({key}{values[key]} and {key}{num})")
        values[key] = num
        pos = m.end()
    if pos != len(body):
        raise unknown(pos)

    g = values.get("g", 1)
    mb = values.get("mb", 2)
    ic, oc = values.get("ic", 0), values.get("oc", 0)
    if ic <= 0 or oc <= 0:
        raise BadInput(f"descriptor {original!r}: 'ic' and 'oc' must be given and positive (got ic={ic}, oc={oc})")
    if g <= 0 or mb <= 0:
        raise BadInput(f"descriptor {original!r}: 'g' and 'mb' must be positive (got g={g}, mb={mb})")

    ax = {a: {k: values.get(k + a, 0) for k in "iokd"} for a in _AXES}
    for a in _AXES:
        ax[a]["s"] = values.get("s" + a, 1)
        ax[a]["p"] = values.get("p" + a, -1)
        if ax[a]["s"] <= 0:
            raise BadInput(f"descriptor {original!r}: stride 's{a}{ax[a]['s']}' must be positive")

    def given(a: str) -> bool:
        v = ax[a]
        return bool(v["i"] or v["k"] or v["o"] or v["d"]) or v["s"] != 1 or v["p"] >= 1

    for a in _AXES:
        if not given(a):
            continue
        v = ax[a]
        if not v["i"] or not v["k"]:
            raise BadInput(f"descriptor {original!r}: axis '{a}' needs both i{a} and k{a} (got i{a}={v['i']}, k{a}={v['k']})")
        eff = (v["k"] - 1) * (v["d"] + 1) + 1
        if not v["o"]:
            if v["p"] < 0:
                v["p"] = 0
            v["o"] = _c_div(v["i"] - eff + 2 * v["p"], v["s"]) + 1
            if v["o"] <= 0:
                raise BadInput(
                    f"descriptor {original!r}: output size o{a}={v['o']} <= 0 "
                    f"(i{a}={v['i']}, k{a}={v['k']}, p{a}={v['p']}, d{a}={v['d']}: the kernel does not fit)"
                )
        elif v["p"] < 0:
            v["p"] = max(0, _c_div((v["o"] - 1) * v["s"] - v["i"] + eff, 2))

    # benchdnn's sanitize_desc: which axes exist, and square/cubic propagation.
    no_d, no_h, no_w = (ax[a]["o"] == 0 for a in _AXES)
    ndim = 3 - (no_d) - (no_d and no_h) - (no_d and no_h and no_w)
    if ndim == 0:
        raise BadInput(f"descriptor {original!r}: no spatial size given (need at least iw/kw, ih/kh or id/kd)")
    if ndim == 3:
        if no_h and no_w:
            ax["h"] = dict(ax["d"])
            ax["w"] = dict(ax["d"])
        elif no_h or no_w:
            raise BadInput(f"descriptor {original!r}: a 3-D problem gives d and one of h/w; give both or neither")
    elif ndim == 2 and no_w:
        ax["w"] = dict(ax["h"])
    axes = _AXES[3 - ndim:]

    pre = tuple(ax[a]["p"] for a in axes)
    # Back padding is whatever makes the given/derived output size come out.
    post = tuple(
        (ax[a]["o"] - 1) * ax[a]["s"] + (ax[a]["k"] - 1) * (ax[a]["d"] + 1) + 1 - (ax[a]["i"] + ax[a]["p"])
        for a in axes
    )
    fields = dict(
        mb=mb, ic=ic, oc=oc, groups=g,
        input=tuple(ax[a]["i"] for a in axes),
        kernel=tuple(ax[a]["k"] for a in axes),
        stride=tuple(ax[a]["s"] for a in axes),
        pad_pre=pre, pad_post=post,
        dilation=tuple(ax[a]["d"] + 1 for a in axes),
        name=name,
    )
    fields.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return ConvProblem(**fields)
    except BadInput as e:
        raise BadInput(f"descriptor {original!r}: {e}") from None


def read_batch_file(path, **overrides) -> list[ConvProblem]:
    """Every descriptor in a benchdnn batch file (comments and blank lines skipped).

    A malformed line raises :class:`BadInput` with the file name and line number.
    """
    from ..base.errors import text_lines

    problems = []
    # a missing or binary file is the user's mistake, said in one line (not a UnicodeDecodeError)
    for lineno, line in enumerate(text_lines(path, None, "a benchdnn batch file: one descriptor a line"), 1):
        body = line.split("#", 1)[0].strip()
        if not body:
            continue
        try:
            problems.append(parse_descriptor(body, **overrides))
        except BadInput as e:
            raise BadInput(f"{path}:{lineno}: {e}") from None
    return problems


def torch_padding(padding, kernel, dilation, stride) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """torch's ``padding`` argument (an int, a tuple, "same" or "valid") as (front, back) per
    axis; "same" puts the odd one at the back, as torch does."""
    nd = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return (0,) * nd, (0,) * nd
        if padding == "same":
            if any(s != 1 for s in stride):
                raise BadInput("padding='same' is not supported for strided convolutions (as in torch)")
            total = tuple(d * (k - 1) for d, k in zip(dilation, kernel))
            return tuple(t // 2 for t in total), tuple(t - t // 2 for t in total)
        raise BadInput(f"padding {padding!r}: expected an int, a tuple, 'same' or 'valid'")
    pad = tuple(int(p) for p in padding) if not isinstance(padding, int) else (padding,) * nd
    if len(pad) == 1:
        pad = pad * nd
    if len(pad) != nd:
        raise BadInput(f"padding {pad} has {len(pad)} entries; a {nd}-D convolution needs {nd}")
    return pad, pad


def _per_axis(value, nd: int, what: str) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * nd
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        return value * nd
    if len(value) != nd:
        raise BadInput(f"{what} {value} has {len(value)} entries; a {nd}-D convolution needs {nd}")
    return value


def problem_from_torch(input, weight, stride=1, padding=0, dilation=1, groups: int = 1, *, bias: bool = False,
                       dtype: str = "fp32", direction: str = "fprop", name: str | None = None) -> "ConvProblem":
    """The problem of ``torch.nn.functional.conv{1,2,3}d(input, weight, bias, stride, padding, dilation,
    groups)`` stated in torch's own arguments: ``input`` and ``weight`` are shapes (``[N, C, *spatial]``,
    ``[K, C/groups, *kernel]``) or anything with a ``.shape``; ``padding`` an int, a tuple, "same" or
    "valid"; ``bias`` whether a bias is added. Taken wherever a descriptor is (``problems=[...]`` as a
    dict of these arguments, ``run_check``)."""
    x_shape = tuple(int(i) for i in getattr(input, "shape", input))
    w_shape = tuple(int(i) for i in getattr(weight, "shape", weight))
    nd = len(x_shape) - 2
    if nd not in (1, 2, 3) or len(w_shape) != nd + 2:
        raise BadInput(f"input of shape {x_shape} and weight of shape {w_shape}: expected [N, C, *spatial] and "
                       "[K, C/groups, *kernel] with 1 to 3 spatial axes")
    kernel = w_shape[2:]
    stride, dilation = _per_axis(stride, nd, "stride"), _per_axis(dilation, nd, "dilation")
    pre, post = torch_padding(padding, kernel, dilation, stride)
    if int(groups) < 1 or x_shape[1] != w_shape[1] * int(groups):
        raise BadInput(f"input of {x_shape[1]} channels and weight of {w_shape[1]} per group with groups={groups}: "
                       "torch needs input channels = weight's second dimension x groups")
    return ConvProblem(mb=x_shape[0], ic=x_shape[1], oc=w_shape[0], input=x_shape[2:], kernel=kernel, stride=stride,
                       pad_pre=pre, pad_post=post, dilation=dilation, groups=int(groups), dtype=dtype,
                       direction=direction, fuse=("bias",) if bias else (), name=name or "")


def as_problem(p, **overrides) -> "ConvProblem":
    """A problem as a user may state it: a :class:`ConvProblem`, a descriptor, or a mapping of torch's
    arguments (:func:`problem_from_torch`: ``{"input": (8, 64, 56, 56), "weight": (64, 64, 3, 3),
    "padding": 1}``); ``overrides`` replace fields afterwards."""
    from collections.abc import Mapping
    from dataclasses import replace

    if isinstance(p, ConvProblem):
        return replace(p, **overrides) if overrides else p
    if isinstance(p, Mapping):
        unknown = set(p) - {"input", "weight", "stride", "padding", "dilation", "groups", "bias", "dtype", "direction",
                            "name"}
        if unknown or not {"input", "weight"} <= set(p):
            raise BadInput(f"a problem as torch's arguments takes input, weight, stride, padding, dilation, groups, "
                           f"bias, dtype, direction and name; got {', '.join(sorted(map(str, p)))}", option="problems")
        problem = problem_from_torch(**p)
        return replace(problem, **overrides) if overrides else problem
    return parse_descriptor(str(p), **overrides)


def problem_from_record(rec: dict) -> "ConvProblem":
    """The problem a check's record (a sweep line, a check's JSON) names: its descriptor and the fields
    beside it (mode, dtype, layout, direction, fusion)."""
    if "problem" in rec and not isinstance(rec["problem"], str):
        raise BadInput(f"the record's problem is {json.dumps(rec['problem'])[:40]}, not a descriptor: it names no "
                       "problem to check")
    try:
        return parse_descriptor(rec["problem"], mode=rec.get("mode") or "xcorr", dtype=rec.get("dtype") or "fp32",
                                layout=layout_from_name(rec.get("layout") or "nchw"),
                                direction=rec.get("direction") or "fprop", fuse=tuple(rec.get("fuse") or ()))
    except KeyError as e:
        raise BadInput(f"the record has no {e} field") from None
