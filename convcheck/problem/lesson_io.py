"""The C++ lesson's files: ``conv_shapes.txt`` and raw float32 ``conv_{x,w,y}.f32``.

``conv_shapes.txt`` has one ``key value`` per line with the keys
``n c h w k r s p q stride pad dilation`` (2-D, NCHW, cross-correlation,
symmetric padding, the same stride and dilation on both axes). The ``.f32``
files are raw little-endian float32 in NCHW / KCRS order with no header.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..base.errors import BadInput, text_lines
from .descriptor import ConvProblem

SHAPE_KEYS = ("n", "c", "h", "w", "k", "r", "s", "p", "q", "stride", "pad", "dilation")
SHAPES_FILE = "conv_shapes.txt"
X_FILE, W_FILE, Y_FILE = "conv_x.f32", "conv_w.f32", "conv_y.f32"


@dataclass
class LessonFiles:
    problem: ConvProblem
    shapes: dict
    x: np.ndarray
    w: np.ndarray
    y: np.ndarray


def read_shapes(path: Path) -> dict:
    """Parse ``conv_shapes.txt``; every malformed line is a BadInput naming it."""
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"{path}: missing (expected a {SHAPES_FILE} with the keys {' '.join(SHAPE_KEYS)})")
    shapes: dict[str, int] = {}
    lines = text_lines(path, None, f"lines 'key value' with the keys {' '.join(SHAPE_KEYS)}")
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise BadInput(f"{path}:{lineno}: malformed line {line.rstrip()!r}; expected 'key value'")
        key, value = parts
        if key not in SHAPE_KEYS:
            raise BadInput(f"{path}:{lineno}: unknown key {key!r}; expected one of {' '.join(SHAPE_KEYS)}")
        try:
            number = int(value)
        except ValueError:
            raise BadInput(f"{path}:{lineno}: value {value!r} for {key!r} is not an integer") from None
        if number < 0 or (number == 0 and key != "pad"):
            raise BadInput(f"{path}:{lineno}: {key} = {number}; expected a positive integer" + (" (or 0)" if key == "pad" else ""))
        if key in shapes:
            raise BadInput(f"{path}:{lineno}: key {key!r} given twice ({shapes[key]} and {number})")
        shapes[key] = number
    missing = [k for k in SHAPE_KEYS if k not in shapes]
    if missing:
        raise BadInput(f"{path}: missing keys {' '.join(missing)}")
    return shapes


def problem_from_shapes(shapes: dict, source: str = SHAPES_FILE) -> ConvProblem:
    s = shapes
    try:
        problem = ConvProblem(
            mb=s["n"], ic=s["c"], oc=s["k"], input=(s["h"], s["w"]), kernel=(s["r"], s["s"]),
            stride=s["stride"], pad_pre=s["pad"], pad_post=s["pad"], dilation=s["dilation"],
        )
    except BadInput as e:
        raise BadInput(f"{source}: {e}") from None
    if problem.output != (s["p"], s["q"]):
        raise BadInput(
            f"{source}: p={s['p']} q={s['q']} do not match the convolution it describes, "
            f"which gives p={problem.output[0]} q={problem.output[1]}"
        )
    return problem


def _read_f32(path: Path, shape: tuple[int, ...], shape_text: str) -> np.ndarray:
    if not path.is_file():
        raise BadInput(f"{path}: missing (expected {int(np.prod(shape)) * 4} bytes of float32 {shape_text})")
    expected = int(np.prod(shape)) * 4
    found = os.path.getsize(path)
    if found != expected:
        raise BadInput(
            f"{path}: expected {expected} bytes ({shape_text} = {int(np.prod(shape))} float32 values), found {found}"
        )
    return np.fromfile(path, dtype="<f4").reshape(shape)


def read_lesson(directory) -> LessonFiles:
    d = Path(directory)
    if not d.is_dir():
        raise BadInput(f"{d}: not a directory (expected the lesson's {SHAPES_FILE} and .f32 files)")
    shapes = read_shapes(d / SHAPES_FILE)
    problem = problem_from_shapes(shapes, str(d / SHAPES_FILE))
    s = shapes
    x = _read_f32(d / X_FILE, problem.x_shape, f"x[n={s['n']},c={s['c']},h={s['h']},w={s['w']}]")
    w = _read_f32(d / W_FILE, problem.w_shape, f"w[k={s['k']},c={s['c']},r={s['r']},s={s['s']}]")
    y = _read_f32(d / Y_FILE, problem.y_shape, f"y[n={s['n']},k={s['k']},p={s['p']},q={s['q']}]")
    return LessonFiles(problem=problem, shapes=shapes, x=x, w=w, y=y)


def lesson_shapes(problem: ConvProblem) -> dict:
    """The ``conv_shapes.txt`` content for ``problem``, or BadInput saying why it has none."""
    p = problem.canonical()
    why = []
    if p.direction != "fprop":
        why.append(f"it is {p.direction} (the lesson's files hold a forward convolution: x, w and y)")
    if p.fuse:
        why.append(f"it fuses {'+'.join(p.fuse)} (the lesson's y is the plain convolution)")
    if p.ndim != 2:
        why.append(f"it is {p.ndim}-D (the lesson is 2-D)")
    if p.groups != 1:
        why.append(f"it has groups={p.groups}")
    if p.mode != "xcorr":
        why.append("it is a true convolution (the lesson is cross-correlation)")
    if p.dtype != "fp32":
        why.append(f"its dtype is {p.dtype}")
    if len(set(p.stride)) != 1 or len(set(p.dilation)) != 1 or len(set(p.pad_pre)) != 1:
        why.append("its stride, padding or dilation differ between h and w")
    if not why:
        symmetric = ConvProblem(mb=p.mb, ic=p.ic, oc=p.oc, input=p.input, kernel=p.kernel, stride=p.stride,
                                pad_pre=p.pad_pre, pad_post=p.pad_pre, dilation=p.dilation)
        if symmetric.output != p.output:
            why.append(f"its back padding {p.pad_post} differs from the front {p.pad_pre} in a way that changes the output size")
    if why:
        raise BadInput(f"{problem.descriptor()} cannot be written as the lesson's {SHAPES_FILE}: " + "; ".join(why))
    return {
        "n": p.mb, "c": p.ic, "h": p.input[0], "w": p.input[1], "k": p.oc, "r": p.kernel[0], "s": p.kernel[1],
        "p": p.output[0], "q": p.output[1], "stride": p.stride[0], "pad": p.pad_pre[0], "dilation": p.dilation[0],
    }


def write_lesson(directory, problem: ConvProblem, x: np.ndarray, w: np.ndarray, y: np.ndarray) -> Path:
    """Write the four lesson files for ``problem`` (NCHW float32) into ``directory``."""
    shapes = lesson_shapes(problem)
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    with open(d / SHAPES_FILE, "w", encoding="utf-8") as f:
        for key in SHAPE_KEYS:
            f.write(f"{key} {shapes[key]}\n")
    for name, array, shape in ((X_FILE, x, problem.x_shape), (W_FILE, w, problem.w_shape), (Y_FILE, y, problem.y_shape)):
        a = np.ascontiguousarray(np.asarray(array), dtype="<f4")
        if a.shape != tuple(shape):
            raise BadInput(f"{name}: array shape {a.shape} does not match the problem's {tuple(shape)}")
        a.tofile(d / name)
    return d
