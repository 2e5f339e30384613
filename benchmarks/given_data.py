"""Verdicts on data convcheck did not choose, at the depths of ResNet-50's layers.

For each data kind (random, post-ReLU, BN-like, offset, constant), each depth and each
direction, the same fp32 data go through
  * correct fp32 computations: torch's own convolution, unfold + matmul (fprop), the
    reduction in reverse channel (dgrad: output-channel, wgrad: image) order, split-K
    (four slices summed in fp32), and plain sequential fp32 summation of every output's
    terms, in natural and in a shuffled order (the least accurate correct ones);
  * half precision: the same data rounded to fp16 and bf16, torch's own convolution in
    that type, and (fprop) ``conv(x, w) + b`` with the bias added in the storage type;
  * bugs: TF32 inputs, bf16 inputs, either operand alone rounded to TF32, an fp16
    accumulator, a 1% error in one element, a dropped reduction channel (wgrad: one input
    channel's outputs), a dropped image, an all-zero output; in half precision the
    element, channel and zero bugs.
Each answer is judged by what users call: ``assert_conv_close`` / ``assert_conv_input_grad_close``
/ ``assert_conv_weight_grad_close`` (default level), and for fp32 fprop also by
``check_stored_output`` (what ``convcheck lesson`` runs on its files). The error of each
answer is max|answer - float64 truth|. A bug is *visible* when its error is at least 3x
the largest error among the correct fp32 computations on the same data (half precision:
among the correct ones in that type).

Usage: python benchmarks/given_data.py [--seeds 4] [--quick]
Prints markdown tables (`--write docs/measurements/NAME.md` makes them a page).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _paths  # noqa: E402

from convcheck import assert_conv_close, assert_conv_input_grad_close, assert_conv_weight_grad_close  # noqa: E402
from convcheck.check.backends import im2col, torch64  # noqa: E402
from convcheck.check.pipeline import check_stored_output  # noqa: E402
from convcheck.base.inputs import ConvInputs  # noqa: E402
from convcheck.check.plant import fp16_accumulation  # noqa: E402
from convcheck.problem.descriptor import parse_descriptor  # noqa: E402
from convcheck.numerics.summation import element_terms  # noqa: E402

# Depths of ResNet-50's layers. fprop/dgrad: n = channels x taps (few outputs, the layer's
# reduction); wgrad: n = batch x output pixels (batch 1 to 64).
SHAPES = {
    "fprop": ["mb2ic3ih14oc8oh7kh7sh2ph3", "mb2ic64ih7oc8oh7kh1ph0", "mb2ic64ih7oc8oh7kh3ph1",
              "mb2ic128ih7oc8oh7kh3ph1", "mb2ic256ih7oc8oh7kh3ph1", "mb2ic512ih7oc8oh7kh3ph1",
              "mb2ic1024ih7oc8oh7kh1ph0", "mb2ic2048ih7oc8oh7kh1ph0"],
    "dgrad": ["mb2ic8ih7oc64oh7kh3ph1", "mb2ic8ih7oc128oh7kh3ph1", "mb2ic8ih7oc256oh7kh3ph1",
              "mb2ic8ih7oc512oh7kh3ph1", "mb2ic8ih7oc2048oh7kh1ph0"],
    "wgrad": ["mb1ic4ih7oc4oh7kh3ph1", "mb1ic4ih56oc4oh56kh3ph1", "mb8ic4ih28oc4oh28kh3ph1",
              "mb8ic4ih56oc4oh56kh1ph0", "mb32ic4ih14oc4oh14kh3ph1", "mb32ic4ih28oc4oh28kh3ph1",
              "mb64ic4ih28oc4oh28kh3ph1", "mb64ic4ih56oc4oh56kh3ph1"],
}
KINDS = ("random", "post-ReLU", "BN-like", "offset", "constant")
FP32_BUGS = ("TF32 inputs", "bf16 inputs", "TF32 first operand", "TF32 second operand", "fp16 accumulation",
             "1% one element", "dropped channel", "dropped image", "all-zero output")
HALF_BUGS = ("1% one element", "dropped channel", "all-zero output")


def tf32(t):
    return ((t.view(torch.int32) + 0x1000) & -0x2000).view(torch.float32)


def bf16(t):
    return t.to(torch.bfloat16).float()


def draw(kind: str, shape, g, channel_axis=1):
    """An activation-like operand of ``kind`` (fp32)."""
    if kind == "constant":
        return torch.full(shape, 0.7)
    z = torch.randn(shape, generator=g)
    if kind == "post-ReLU":
        return z.clamp(min=0)
    if kind == "offset":
        return z + 3.0
    if kind == "BN-like":
        view = [1] * len(shape)
        view[channel_axis] = shape[channel_axis]
        gamma = torch.rand(shape[channel_axis], generator=g) * 1.5 + 0.5
        beta = torch.rand(shape[channel_axis], generator=g) * 2 - 1
        return z * gamma.reshape(view) + beta.reshape(view)
    return z


def operands(p, kind: str, g):
    """(x, w, dy) in fp32: the activation-like operand of each direction has ``kind``; the
    weights are zero-mean (He init) and the output gradient N(0, 1), except for the constant
    kind, where every operand is constant (every term equal: correlated rounding)."""
    fan_in = p.w_shape[1] * math.prod(p.kernel)
    w = torch.full(p.w_shape, 0.3) if kind == "constant" else torch.randn(p.w_shape, generator=g) / math.sqrt(fan_in)
    dy = torch.full(p.y_shape, 0.3) if kind == "constant" else torch.randn(p.y_shape, generator=g)
    x = draw(kind, p.x_shape, g)
    if p.direction == "dgrad":
        dy = draw(kind, p.y_shape, g)
    return x, w, dy


def conv(p, x, w, dy):
    """The direction's result, torch in the tensors' own type."""
    if p.direction == "fprop":
        return F.conv2d(x, w, stride=p.stride, padding=p.pad_pre)
    if p.direction == "dgrad":
        return torch.nn.grad.conv2d_input(p.x_shape, w, dy, stride=p.stride, padding=p.pad_pre)
    return torch.nn.grad.conv2d_weight(x, p.w_shape, dy, stride=p.stride, padding=p.pad_pre)


def reduction_axes(p):
    """(tensor names, axis) sliced to split or reorder the reduction: channels for fprop, output
    channels for dgrad, images for wgrad."""
    return {"fprop": (("x", 1), ("w", 1)), "dgrad": (("dy", 1), ("w", 0)), "wgrad": (("x", 0), ("dy", 0))}[p.direction]


def sliced(p, ops: dict, sl) -> dict:
    out = dict(ops)
    for name, axis in reduction_axes(p):
        idx = [slice(None)] * ops[name].dim()
        idx[axis] = sl
        out[name] = ops[name][tuple(idx)]
    return out


def reversed_order(p, ops):
    out = dict(ops)
    for name, axis in reduction_axes(p):
        out[name] = ops[name].flip(axis)
    return conv(p, out["x"], out["w"], out["dy"])


def split_k(p, ops, parts=4):
    size = ops[reduction_axes(p)[0][0]].shape[reduction_axes(p)[0][1]]
    step = max(1, -(-size // parts))
    total = None
    for start in range(0, size, step):
        part = sliced(p, ops, slice(start, start + step))
        if p.direction == "wgrad":
            y = torch.nn.grad.conv2d_weight(part["x"], p.w_shape, part["dy"], stride=p.stride, padding=p.pad_pre)
        elif p.direction == "dgrad":
            y = torch.nn.grad.conv2d_input(p.x_shape, part["w"], part["dy"], stride=p.stride, padding=p.pad_pre)
        else:
            y = F.conv2d(part["x"], part["w"], stride=p.stride, padding=p.pad_pre)
        total = y if total is None else total + y  # fp32 additions
    return total


def sequential(p, ops, shuffle: int | None):
    """Every output's terms summed one at a time in fp32 (products rounded to fp32 first)."""
    out = torch.empty(p.result_shape, dtype=torch.float32)
    perm = None
    for index in np.ndindex(*p.result_shape):
        t = element_terms(p, ops["x"], ops["w"], ops["dy"], index).reshape(-1).numpy()
        if shuffle is not None:
            if perm is None or perm.size != t.size:
                perm = np.random.default_rng(shuffle).permutation(t.size)
            t = t[perm]
        out[index] = float(np.add.accumulate(t.astype(np.float32), dtype=np.float32)[-1]) if t.size else 0.0
    return out


def verdict(p, out, ops, bias=None) -> str:
    """'pass', 'probable' or 'rigorous' (the level failed) from the assert users call. No diagnosis
    (``diagnose=0``): the verdict is what is measured, and naming each bug's arithmetic made the run 5x longer (--quick: 89 s, 17 s without)."""
    kw = dict(stride=p.stride, padding=p.pad_pre, diagnose=0)
    try:
        if p.direction == "fprop":
            assert_conv_close(out, ops["x"], ops["w"], bias, **kw)
        elif p.direction == "dgrad":
            assert_conv_input_grad_close(out, p.x_shape, ops["w"], ops["dy"], **kw)
        else:
            assert_conv_weight_grad_close(out, ops["x"], p.w_shape, ops["dy"], **kw)
    except AssertionError as e:
        return "probable" if "Level: probable" in str(e) else "rigorous"
    return "pass"


def lesson_verdict(p, out, ops) -> str:
    r = check_stored_output(p, ops["x"].numpy(), ops["w"].numpy(), out.numpy(), device="cpu", diagnose=0)
    return "pass" if r.status == "passed" else (r.comparison.level or "rigorous")


def fp32_bugs(p, ops):
    x, w, dy = ops["x"], ops["w"], ops["dy"]
    first, second = {"fprop": ("x", "w"), "dgrad": ("dy", "w"), "wgrad": ("x", "dy")}[p.direction]
    good = conv(p, x, w, dy)

    def with_(**changes):
        o = dict(ops, **changes)
        return conv(p, o["x"], o["w"], o["dy"])

    bugs = {
        "TF32 inputs": with_(x=tf32(x), w=tf32(w), dy=tf32(dy)),
        "bf16 inputs": with_(x=bf16(x), w=bf16(w), dy=bf16(dy)),
        "TF32 first operand": with_(**{first: tf32(ops[first])}),
        "TF32 second operand": with_(**{second: tf32(ops[second])}),
        "fp16 accumulation": torch.from_numpy(fp16_accumulation(
            p, ConvInputs(x=x.numpy(), w=w.numpy(), seed=-1, dy=None if p.direction == "fprop" else dy.numpy()))),
        "1% one element": element_bug(good),
        "all-zero output": torch.zeros_like(good),
    }
    name, axis = reduction_axes(p)[0]
    if p.direction == "wgrad":
        dropped = good.clone()
        dropped[:, 0] = 0
        bugs["dropped channel"] = dropped
        if p.mb > 1:
            bugs["dropped image"] = with_(x=torch.cat([torch.zeros_like(x[:1]), x[1:]]))
    else:
        zeroed = ops[name].clone()
        zeroed.select(axis, 0).zero_()
        bugs["dropped channel"] = with_(**{name: zeroed})
        dropped = good.clone()
        dropped[0] = 0
        bugs["dropped image"] = dropped
    return bugs


def element_bug(good):
    out = good.clone()
    flat = out.reshape(-1)
    flat[flat.numel() // 2] *= 1.01
    return out


def half_runs(p, ops, dtype, g):
    """(correct answers, bugs) in ``dtype``: the data rounded to it, torch's own convolution."""
    h = {k: v.to(dtype) for k, v in ops.items()}
    good = conv(p, h["x"], h["w"], h["dy"])
    correct = {f"torch {dtype}": (good, h, None)}
    if p.direction == "fprop":
        b = (torch.randn(p.oc, generator=g) * 2).to(dtype)
        correct[f"torch {dtype} + bias in {dtype}"] = (good + b.reshape(1, -1, 1, 1), h, b)
    bugs = {"1% one element": _element_half(good),
            "all-zero output": torch.zeros_like(good)}
    name, axis = reduction_axes(p)[0]
    if p.direction == "wgrad":
        dropped = good.clone()
        dropped[:, 0] = 0
    else:
        zeroed = h[name].clone()
        zeroed.select(axis, 0).zero_()
        o = dict(h, **{name: zeroed})
        dropped = conv(p, o["x"], o["w"], o["dy"])
    bugs["dropped channel"] = dropped
    return correct, bugs, h


def _element_half(good):
    out = good.clone()
    flat = out.reshape(-1)
    flat[flat.numel() // 2] = (flat[flat.numel() // 2].double() * 1.01).to(good.dtype)
    return out


def error(out, truth) -> float:
    return float((out.double() - truth).abs().max())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=4, help="data draws per kind and shape (correct runs); bugs on the first")
    ap.add_argument("--quick", action="store_true", help="two shapes per direction, one seed (a smoke run)")
    _paths.add_option(ap)
    args = ap.parse_args(argv)
    print(f"# {_paths.apply(args)}")
    shapes = {d: (s[::max(1, len(s) // 2)][:2] if args.quick else s) for d, s in SHAPES.items()}
    seeds = 1 if args.quick else args.seeds
    start = time.perf_counter()
    correct_total = Counter()
    false_alarms = []
    bug_rows = defaultdict(lambda: {"visible": 0, "caught": 0, "caught_visible": 0, "lesson_caught": 0, "lesson_visible": 0,
                                    "runs": 0, "levels": Counter()})
    missed = []
    depth_rows = []
    for direction, descs in shapes.items():
        for desc in descs:
            p = parse_descriptor(desc, direction=direction)
            for kind in KINDS:
                for seed in range(seeds):
                    g = torch.Generator().manual_seed(1000 * seed + KINDS.index(kind))
                    x, w, dy = operands(p, kind, g)
                    ops = {"x": x, "w": w, "dy": dy}
                    truth, _ = torch64.compute(p, x.double(), w.double(), dy.double() if direction != "fprop" else None)
                    peers = {"torch": conv(p, x, w, dy), "reverse order": reversed_order(p, ops),
                             "split-K": split_k(p, ops), "sequential": sequential(p, ops, None),
                             "sequential, shuffled": sequential(p, ops, 7)}
                    if direction == "fprop":
                        peers["unfold+matmul"] = torch.from_numpy(im2col.conv_forward(p, x.numpy(), w.numpy()))
                    worst_correct = max(error(o, truth) for o in peers.values())
                    for name, out in peers.items():
                        v = verdict(p, out, ops)
                        correct_total[("fp32", name)] += 1
                        if v != "pass":
                            false_alarms.append((desc, direction, kind, seed, name, v))
                        if direction == "fprop" and name in ("torch", "sequential"):
                            correct_total[("lesson", name)] += 1
                            lv = lesson_verdict(p, out, ops)
                            if lv != "pass":
                                false_alarms.append((desc, direction, kind, seed, f"lesson: {name}", lv))
                    half_worst = {}
                    half_bugs = {}
                    for dtype in (torch.float16, torch.bfloat16):
                        correct, bugs, h = half_runs(p, ops, dtype, g)
                        t_h, _ = torch64.compute(p, h["x"].double(), h["w"].double(),
                                                 h["dy"].double() if direction != "fprop" else None)
                        half_worst[dtype] = error(correct[f"torch {dtype}"][0], t_h)
                        for name, (out, hops, b) in correct.items():
                            v = verdict(p, out, hops, b)
                            correct_total[(str(dtype).replace("torch.", ""), name.split(" + ")[-1] if "+" in name else "torch")] += 1
                            if v != "pass":
                                false_alarms.append((desc, direction, kind, seed, name, v))
                        half_bugs[dtype] = (bugs, h, t_h)
                    if seed:
                        continue
                    n = p.accumulation_depth
                    for name, out in fp32_bugs(p, ops).items():
                        e = error(out, truth)
                        visible = e >= 3 * worst_correct
                        v = verdict(p, out, ops)
                        row = tally(bug_rows[(direction, "fp32", name)], visible, v)
                        if visible and v == "pass":
                            missed.append((desc, direction, kind, "fp32", name, e, worst_correct))
                        if direction == "fprop":
                            lv = lesson_verdict(p, out, ops)
                            row["lesson_visible"] += visible
                            row["lesson_caught"] += visible and lv != "pass"
                            if visible and lv == "pass":
                                missed.append((desc, "lesson", kind, "fp32", name, e, worst_correct))
                        depth_rows.append((direction, n, kind, name, e, worst_correct, v,
                                           worst_correct / max(float(truth.abs().max()), 1e-300)))
                    for dtype, (bugs, h, t_h) in half_bugs.items():
                        for name, out in bugs.items():
                            e = error(out, t_h)
                            visible = e >= 3 * half_worst[dtype]
                            v = verdict(p, out, h)
                            tally(bug_rows[(direction, str(dtype).replace("torch.", ""), name)], visible, v)
                            if visible and v == "pass":
                                missed.append((desc, direction, kind, str(dtype), name, e, half_worst[dtype]))
            print(f"# {direction} {desc} n={p.accumulation_depth} done at {time.perf_counter() - start:.0f} s",
                  file=sys.stderr, flush=True)
    print_tables(correct_total, false_alarms, bug_rows, missed, depth_rows, time.perf_counter() - start)
    return 0


def tally(row: dict, visible: bool, v: str) -> dict:
    """Count one bug's run into its table row (``v``: the verdict, "pass" or the level failed)."""
    row["runs"] += 1
    row["visible"] += visible
    row["caught"] += v != "pass"
    row["caught_visible"] += visible and v != "pass"
    row["levels"][v] += 1
    return row


def print_tables(correct_total, false_alarms, bug_rows, missed, depth_rows, seconds):
    total = sum(correct_total.values())
    print(f"### Correct computations on given data: {total} judged, {len(false_alarms)} false alarms\n")
    print("| type | computation | judged |\n|---|---|---:|")
    for (dt, name), count in sorted(correct_total.items()):
        print(f"| {dt} | {name} | {count} |")
    for fa in false_alarms:
        print(f"\nFALSE ALARM: {fa}")
    vis = sum(r["visible"] for r in bug_rows.values())
    cv = sum(r["caught_visible"] for r in bug_rows.values())
    lv = sum(r["lesson_visible"] for r in bug_rows.values())
    lc = sum(r["lesson_caught"] for r in bug_rows.values())
    print(f"\n### Bugs on given data: asserts catch {cv} of {vis} visible ({100.0 * cv / max(vis, 1):.1f}%); "
          f"convcheck lesson (fp32 fprop) {lc} of {lv}\n")
    print("| direction | type | bug | runs | visible | caught (all) | caught visible | by level (pass/probable/rigorous) | lesson: caught visible |")
    print("|---|---|---|---:|---:|---:|---:|---|---:|")
    for (direction, dt, name), r in sorted(bug_rows.items()):
        lv_cell = f"{r['lesson_caught']}/{r['lesson_visible']}" if direction == "fprop" and dt == "fp32" else ""
        levels = f"{r['levels']['pass']}/{r['levels']['probable']}/{r['levels']['rigorous']}"
        print(f"| {direction} | {dt} | {name} | {r['runs']} | {r['visible']} | {r['caught']} | {r['caught_visible']} | {levels} | {lv_cell} |")
    if missed:
        print("\nMissed visible bugs (shape, direction, kind, type, bug, error, largest correct error):")
        for m in missed:
            print(f"  {m[0]} {m[1]} {m[2]} {m[3]} {m[4]}: {m[5]:.3g} vs {m[6]:.3g}")
    print("\n### By data kind (fp32 bugs, every depth and direction)\n")
    print("| data | bugs run | visible | caught visible | smallest visible bug error / largest correct error | "
          "largest correct error (relative to max abs y) |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind in KINDS:
        rows = [r for r in depth_rows if r[2] == kind]
        vis = [r for r in rows if r[4] >= 3 * r[5]]
        caught = sum(r[6] != "pass" for r in vis)
        smallest = min((r[4] / max(r[5], 1e-300) for r in vis), default=math.nan)
        worst_rel = max((r[7] for r in rows), default=math.nan)
        print(f"| {kind} | {len(rows)} | {len(vis)} | {caught} | {smallest:.3g} | {worst_rel:.3g} |")
    print("\n### Per depth (fp32 bugs, random data): bug error / largest correct error, and the verdict\n")
    names = FP32_BUGS
    print("| direction | n | " + " | ".join(names) + " |")
    print("|---|---:|" + "---|" * len(names))
    by = defaultdict(dict)
    for direction, n, kind, name, e, worst, v, _ in depth_rows:
        if kind == "random":
            by[(direction, n)][name] = f"{e / max(worst, 1e-300):.3g} {'' if v == 'pass' else ('P' if v == 'probable' else 'R')}"
    for (direction, n), cells in sorted(by.items(), key=lambda kv: (["fprop", "dgrad", "wgrad"].index(kv[0][0]), kv[0][1])):
        print(f"| {direction} | {n} | " + " | ".join(cells.get(nm, "-") for nm in names) + " |")
    print("\n(R: failed at the rigorous level, P: at the probable level, blank: passed)")
    print(f"\n{seconds:.0f} s")


if __name__ == "__main__":
    import _page  # noqa: E402

    sys.exit(_page.run(main, 'Verdicts on given data', __doc__))
