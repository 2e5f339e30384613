#!/usr/bin/env python3
"""cuDNN fprop fp32 reproducer: mb2ic16ih14iw14oc8oh14ow14kh3kw3sh1sw1ph1pw1dh0dw0

One cuDNN convolution, checked in one file that needs no convcheck: it builds the graph with
the cuDNN frontend's Python API, runs it on CuPy buffers, hands the output to torch through
DLPack, recomputes it with torch in float64 with cuDNN switched off (so the reference is not
the library under test), and applies convcheck's bound, written out below.

Needs: nvidia-cudnn-frontend (import cudnn), a libcudnn (nvidia-cudnn-cu12 or -cu13), CuPy,
torch, NumPy; an NVIDIA GPU from step 2 on. Without one it builds and prints the graph,
says so in one line and exits 3.
    python repro.py        exit 0 PASS, 1 FAIL, 3 no GPU
Written by convcheck 0.1.0 from convcheck graph mb2ic16ih14oc8oh14kh3ph1 --python.
"""

import math
import sys

try:
    import numpy as np
    import torch
    import torch.nn.functional as F

    import cudnn
except ImportError as e:  # one line and exit 3, as without a GPU: the script cannot run here
    print(f"this script needs torch, NumPy and the cuDNN frontend (pip install nvidia-cudnn-frontend "
          f"nvidia-cudnn-cu12 cupy-cuda12x, or the -cu13/cuda13x ones): {e}", file=sys.stderr)
    sys.exit(3)

# ---------------------------------------------------------------- the problem
# Dims are always logical: N, C, then the spatial axes (D, H, W); the strides say how they
# are laid out in memory (channels-last: C varies fastest).
PROBLEM = 'mb2ic16ih14iw14oc8oh14ow14kh3kw3sh1sw1ph1pw1dh0dw0'  # the benchdnn descriptor
DIRECTION = 'fprop'  # fprop: y = conv(x, w); dgrad: dx from dy and w; wgrad: dw from x and dy
DTYPE = 'fp32'  # fp32 (IEEE), tf32 (fp32 tensors on TF32 tensor cores), fp16, bf16: storage type
MODE = 'xcorr'  # xcorr: cross-correlation (what deep learning calls convolution); conv: kernel flipped
N, C, K, GROUPS = 2, 16, 8, 1
INPUT, KERNEL, OUTPUT = [14, 14], [3, 3], [14, 14]
STRIDE, DILATION = [1, 1], [1, 1]  # dilation 1 means none
PRE_PADDING, POST_PADDING = [1, 1], [1, 1]  # a negative back padding: last rows never read
CHANNELS_LAST = False
BIAS, ACTIVATION = False, None  # fused after a forward convolution
LEAKY_SLOPE = 0.01

# ---------------------------------------------------------------- what the check chose
SEED, FILL, DENSITY = 0, 'exact', 1.0  # drawn on the host: the same values on every machine and GPU
DATA_FILES = {}  # given data: .npy files beside this script (role -> file name)
BOUND = 'exact'  # given data: the rigorous level only (convcheck's probable level examines outputs one by one)
BOUND_TERMS = {}
BOUND_VARIANCE = False
BOUND_TEXT = 'exact: only identical outputs pass (every partial sum of the exact fill is representable)'
FAST_BOUND_FILE = None  # a fast algorithm (Winograd, FFT): its allowance's per-output parts, beside this script

ND = len(INPUT)
CROPPED = [14, 14]  # the input rows the convolution reads (fewer than INPUT after a negative back padding)
DEPTH = 144  # terms summed per output: (C/g)*kernel (fprop), (K/g)*kernel (dgrad), N*output (wgrad)
LIVE_DEPTH = 144  # of those, at most how many can read real input (not padding)
FINE_BLOCKS = {'x': (1, (1, 16), 0), 'w': (1, (16,), 1)}  # exact fill: role -> (axis, its split, half) holding fine values, or "all"
X_SHAPE, W_SHAPE, Y_SHAPE = [N, C, *INPUT], [K, C // GROUPS, *KERNEL], [N, K, *OUTPUT]
STORAGE = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[DTYPE]


def strides(shape):
    """Element strides of a dense tensor of logical ``shape``: N, C, spatial in memory, or
    (channels-last) N, spatial, C."""
    order = [0, *range(2, len(shape)), 1] if CHANNELS_LAST else list(range(len(shape)))
    out, step = [0] * len(shape), 1
    for axis in reversed(order):
        out[axis], step = step, step * shape[axis]
    return out


# ---------------------------------------------------------------- the plan
ENGINE = None  # a plan's name, or None: the first plan the heuristics offer that builds
EVERY_PLAN = False  # True: one plan of a check of every engine (no numerical-note filter, as there)
HEURISTICS = ['A', 'FALLBACK']


# ---------------------------------------------------------------- step 1: the graph
def build_graph():
    """Create the graph, declare its tensors, add the convolution node (and the fusion).
    Returns (graph, {role: tensor}, output role). No GPU is needed for this step."""
    io = {"fp32": cudnn.data_type.FLOAT, "tf32": cudnn.data_type.FLOAT,  # TF32 is chosen by engine, below
          "fp16": cudnn.data_type.HALF, "bf16": cudnn.data_type.BFLOAT16}[DTYPE]
    fp32 = cudnn.data_type.FLOAT
    # io: the tensors' type; compute and intermediates (a fused chain's virtual tensors): fp32
    graph = cudnn.pygraph(name="repro", io_data_type=io, intermediate_data_type=fp32, compute_data_type=fp32)

    def tensor(role, shape, dims=None):
        # dims may be a cropped view (negative back padding) of a buffer of ``shape``: same strides
        return graph.tensor(name=role, dim=list(dims or shape), stride=strides(shape), data_type=io)

    mode = cudnn._pybind_module.convolution_mode
    common = dict(pre_padding=PRE_PADDING, post_padding=[max(p, 0) for p in POST_PADDING], stride=STRIDE,
                  dilation=DILATION, compute_data_type=fp32,
                  convolution_mode=mode.CROSS_CORRELATION if MODE == "xcorr" else mode.CONVOLUTION)
    cropped_x = [N, C, *CROPPED]
    if DIRECTION == "fprop":
        t = {"X": tensor("X", X_SHAPE, cropped_x), "W": tensor("W", W_SHAPE)}
        out = graph.conv_fprop(image=t["X"], weight=t["W"], name="conv_fprop", **common)
        if BIAS:
            t["B"] = tensor("B", [1, K] + [1] * ND)
            out = graph.bias(input=out, bias=t["B"], name="bias")
        if ACTIVATION == "relu":
            out = graph.relu(input=out, name="relu")
        elif ACTIVATION == "leaky_relu":
            out = graph.leaky_relu(input=out, negative_slope=LEAKY_SLOPE, name="leaky_relu")
        elif ACTIVATION == "gelu_tanh":
            out = graph.gelu_approx_tanh(input=out, name="gelu_tanh")
        elif ACTIVATION:
            out = getattr(graph, ACTIVATION)(input=out, name=ACTIVATION)  # gelu, sigmoid, tanh
        role, shape, dims = "Y", Y_SHAPE, Y_SHAPE
    elif DIRECTION == "dgrad":
        t = {"DY": tensor("DY", Y_SHAPE), "W": tensor("W", W_SHAPE)}
        out = graph.conv_dgrad(loss=t["DY"], filter=t["W"], name="conv_dgrad", **common)
        role, shape, dims = "DX", X_SHAPE, cropped_x
    else:
        t = {"X": tensor("X", X_SHAPE, cropped_x), "DY": tensor("DY", Y_SHAPE)}
        out = graph.conv_wgrad(image=t["X"], loss=t["DY"], name="conv_wgrad", **common)
        role, shape, dims = "DW", W_SHAPE, W_SHAPE
    # The output's dims, strides and type are set explicitly (dgrad/wgrad cannot infer them).
    out.set_output(True).set_dim(list(dims)).set_stride(strides(shape)).set_data_type(io)
    t[role] = out
    return graph, t, role


# ---------------------------------------------------------------- step 4: the inputs
class HostBits:
    """NumPy's PCG64 seeded with SEED: the inputs convcheck drew (always on the host)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def _raw(self, count, dtype):
        per_word = 8 // np.dtype(dtype).itemsize
        return self.rng.bit_generator.random_raw((count + per_word - 1) // per_word).view(dtype)[:count]

    def uniform(self, shape):
        a = self.rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
        return to_storage(torch.from_numpy(a)).numpy() if DTYPE in ("fp16", "bf16") else a

    def int16(self, count):
        return self._raw(count, np.int16)

    def two_bits(self, count):
        return self._raw(count, np.uint8) & 3

    def integers(self, low, high, shape):
        return self.rng.integers(low, high + 1, size=shape).astype(np.float32)

    def keep(self, shape, density):
        return self._raw(math.prod(shape), np.uint32).reshape(shape) < np.uint32(min(density * 2.0 ** 32, 2.0 ** 32 - 1))

    def scaled(self, m, unit):
        return np.multiply(m, np.float32(unit), dtype=np.float32)

    def lookup(self, table, index):
        return np.asarray(table, np.float32).take(index)

    def where(self, mask, a):
        return np.where(mask, a, np.float32(0))

    def empty(self, shape):
        return np.empty(shape, np.float32)


def to_storage(t):
    """fp32 values rounded to the storage type (round to nearest even), back as fp32."""
    return t.to(STORAGE).float()


def make_inputs():
    """{role: float32 array}. ``random``: uniform in [-1, 1) (rounded to fp16/bf16 for those).
    ``exact``: values on a grid whose every partial sum is exact in fp32, so every correct
    summation order gives the same bits: fine values, odd multiples of 2^-13 (fp32; 2^-11 for
    TF32), which TF32, bf16 and fp8 must round, and coarse ones, +-1 and +-2 (fp16/bf16:
    integers in [-2, 2]); the operand summed over is thinned to DENSITY (the recorded value)
    so sums stay small.
    ``given``: the .npy files beside this script."""
    if FILL == "given":
        import os

        here = os.path.dirname(os.path.abspath(__file__))
        return {role: np.load(os.path.join(here, name)) for role, name in DATA_FILES.items()}
    bits = HostBits(SEED)  # on the host: the values convcheck drew, on any machine and GPU
    if FILL == "random":
        inputs = {"X": bits.uniform(X_SHAPE), "W": bits.uniform(W_SHAPE)}
        if DIRECTION != "fprop":
            inputs["DY"] = bits.uniform(Y_SHAPE)
        if BIAS:
            inputs["B"] = bits.uniform([K])
        return inputs
    thinned = "DY" if DIRECTION == "dgrad" else "X"
    if DTYPE in ("fp32", "tf32"):
        b = 13 if DTYPE == "fp32" else 11
        limit, max_term = 2.0 ** (24 - b), 2.0  # every product is fine x coarse: |term| < 2

        def fine(shape):  # odd multiples of 2^-b: 12-13 significant bits for fp32
            m = bits.int16(math.prod(shape))
            m >>= 15 - b
            m |= 1
            return bits.scaled(m, 2.0 ** -b).reshape(shape)

        def coarse(shape):  # +-1, +-2
            return bits.lookup([-2.0, -1.0, 1.0, 2.0], bits.two_bits(math.prod(shape))).reshape(shape)

        def draw(shape, role):
            # FINE_BLOCKS: where an operand holds fine values (no product takes two of them, so
            # every partial sum stays exact; each operand has some, so rounding either shows)
            where = FINE_BLOCKS.get(role.lower())
            if where == "all":
                return fine(shape)
            if where is None:
                return coarse(shape)
            axis, split, half = where  # fine on one half of an axis (per group), coarse on the other
            view = tuple(shape[:axis]) + tuple(split) + tuple(shape[axis + 1:])
            lead, cut = (slice(None),) * (axis + len(split) - 1), split[-1] // 2
            halves = [lead + (slice(0, cut),), lead + (slice(cut, None),)]
            a = bits.empty(shape)
            part = a.reshape(view)
            part[halves[half]] = fine(tuple(part[halves[half]].shape))
            part[halves[1 - half]] = coarse(tuple(part[halves[1 - half]].shape))
            return a
    else:
        limit, max_term = 2.0 ** min(24, 11 if DTYPE == "fp16" else 8), 4.0

        def draw(shape, role):
            return bits.integers(-2, 2, shape)
    inputs = {"X": draw(X_SHAPE, "X"), "W": draw(W_SHAPE, "W")}
    if DIRECTION != "fprop":
        inputs["DY"] = draw(Y_SHAPE, "DY")
    if BIAS:
        inputs["B"] = bits.integers(-2, 2, [K])
    if max(LIVE_DEPTH, 1) * max_term > limit - (2 if BIAS else 0):  # sums could leave the exact range: thinned
        full = inputs[thinned]
        inputs[thinned] = bits.where(bits.keep(tuple(full.shape), DENSITY), full)
    return inputs


# ---------------------------------------------------------------- step 6: the reference
def direction_sum(x, w, dy, bias=None, activation=None):
    """The problem's result from float64 tensors with torch's own kernels (cuDNN is switched off
    by the caller): y (with bias and activation), dx or dw. Backward directions differentiate
    the forward convolution (autograd), which handles any padding."""
    conv = (F.conv1d, F.conv2d, F.conv3d)[ND - 1]
    flip = tuple(range(2, 2 + ND))
    pads = [p for pre, post in reversed(list(zip(PRE_PADDING, POST_PADDING))) for p in (pre, post)]
    dil = [d if k > 1 else 1 for d, k in zip(DILATION, KERNEL)]

    def forward(xx, ww):
        ww = ww.flip(flip) if MODE == "conv" else ww
        return conv(F.pad(xx, pads), ww, stride=STRIDE, dilation=dil, groups=GROUPS)

    if DIRECTION == "fprop":
        y = forward(x, w)
        if bias is not None:
            y = y + bias.reshape([1, K] + [1] * ND)
        act = {None: lambda v: v, "relu": F.relu, "leaky_relu": lambda v: F.leaky_relu(v, LEAKY_SLOPE),
               "gelu": F.gelu, "gelu_tanh": lambda v: F.gelu(v, approximate="tanh"),
               "sigmoid": torch.sigmoid, "tanh": torch.tanh}[activation]
        return act(y)
    with torch.enable_grad():
        if DIRECTION == "dgrad":
            x0 = torch.zeros(X_SHAPE, dtype=w.dtype, device=w.device, requires_grad=True)
            return torch.autograd.grad(forward(x0, w), x0, dy)[0]
        w0 = torch.zeros(W_SHAPE, dtype=x.dtype, device=x.device, requires_grad=True)
        return torch.autograd.grad(forward(x, w0), w0, dy)[0]


# ---------------------------------------------------------------- step 7: the bound
def allowed_error(ref, x, w, dy, bias):
    """Per output, how far a correct answer may be from the float64 reference (convcheck's bound,
    its numbers computed for this problem and written into BOUND_TERMS)."""
    if BOUND == "exact":  # every correct summation order gives the same bits
        return torch.zeros_like(ref)
    if BOUND == "lesson":  # the lesson's rule: rtol = max(1e-5, 4 * 2^-23 * sqrt(depth)), atol = rtol * max|ref|
        rtol = BOUND_TERMS["rtol"]
        return rtol * ref.abs().max() + rtol * ref.abs()
    if FAST_BOUND_FILE:  # a fast algorithm's allowance (step 7, for a fast algorithm)
        return fast_allowance(ref, x, w, dy)

    def magnitude(power):
        """sum over the terms of |t_i| (power 1) or t_i^2 (power 2), in float64, inflated for its own rounding."""
        f = (lambda a: None if a is None else (a.abs() if power == 1 else a * a))
        nu = max(DEPTH, 1) * 2.0 ** -53
        inflation = 1.0 / (1.0 - nu / (1.0 - nu)) * ((1 + 2.0 ** -53) ** 2 if power == 2 else 1.0)
        return direction_sum(f(x), f(w), f(dy)) * inflation

    c_a, c_s, c_y, eta, slope, act_ulps, bias_rounding, stored_c, walk, stored_z = (BOUND_TERMS[name] for name in (
        "c_a", "c_s", "c_y", "eta", "slope", "act", "bias_rounding", "stored_c", "walk", "stored_z"))
    a = magnitude(1)  # A = conv(|x|, |w|): bounds every partial sum (Higham, worst case)
    s2 = magnitude(2) if BOUND_VARIANCE else None  # S2 = conv(x^2, w^2)
    b = None if bias is None else bias.abs().reshape([1, K] + [1] * ND).expand(a.shape)
    if b is not None:
        a = a + b
        s2 = None if s2 is None else s2 + b * b
    acc = c_a * a
    if BOUND_VARIANCE:  # random signs keep sums near sqrt(S2) (Higham & Mary, Hoeffding)
        acc = torch.minimum(acc, c_s * torch.sqrt(s2))
    if BIAS or ACTIVATION:  # a fused epilogue: the activation's largest slope, its own rounding,
        # and the rounding of each stored intermediate (the convolution c, the biased sum z) by its size
        generic = torch.minimum(a, walk * torch.sqrt(s2)) if BOUND_VARIANCE else a
        if ACTIVATION in (None, "relu"):  # the output gives z back (relu: where positive)
            known = ref.abs() > 0 if ACTIVATION == "relu" else torch.ones_like(ref, dtype=torch.bool)
            z = torch.where(known, torch.minimum(ref.abs(), generic), generic)
            c = z if b is None else torch.where(known, torch.minimum(ref.abs() + b, generic), generic)
        else:
            c = z = generic
        acc = slope * (acc + stored_c * c + (bias_rounding + stored_z) * z) + act_ulps * ref.abs()
    return acc + c_y * (ref.abs() + acc) + eta


# ---------------------------------------------------------------- step 8: the verdict
def verdict(ours, ref, allowed):
    """Print how far ``ours`` is from ``ref`` against ``allowed``; 0 PASS, 1 FAIL."""
    diff = (ours.double() - ref).abs()
    same = (ours.double() == ref) | (torch.isnan(ours) & torch.isnan(ref))
    bad = ~((diff <= allowed) | same)
    ratio = torch.where(allowed > 0, diff / allowed, torch.where(diff > 0, math.inf, 0.0))
    worst = int(torch.nan_to_num(ratio, nan=math.inf).reshape(-1).argmax())
    index = tuple(int(i) for i in np.unravel_index(worst, tuple(ours.shape)))
    outside = int(bad.sum())
    print(f"bound: {BOUND_TEXT}")
    print(f"max |ours - ref| = {float(torch.nan_to_num(diff, nan=math.inf).max()):.3e}; largest error/bound "
          f"{float(torch.nan_to_num(ratio, nan=math.inf, posinf=math.inf).max()):.3g} at {index}: ours {float(ours[index]):.9g}, "
          f"ref {float(ref[index]):.9g}")
    # The verdict, and an exit code a script can use.
    if outside:
        print(f"FAIL: {outside} of {ours.numel()} outputs outside the bound")
        return 1
    print(f"PASS: all {ours.numel()} outputs inside the bound")
    return 0


def _version(md, *names):
    for name in names:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            pass
    return "not installed"


# ---------------------------------------------------------------- the steps, in order
def main():
    import importlib.metadata as md

    print(f"problem: {PROBLEM} ({DIRECTION}, {DTYPE}, {'channels-last' if CHANNELS_LAST else 'channels-first'})")
    print(f"versions: cudnn-frontend {cudnn.__version__}, cuDNN {cudnn.backend_version()}, torch {torch.__version__}, "
          f"numpy {np.__version__}, cupy {_version(md, 'cupy-cuda12x', 'cupy-cuda13x', 'cupy')}")
    graph, t, out_role = build_graph()
    print("graph:", graph)
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1 or not torch.cuda.is_available():
            raise RuntimeError("no CUDA GPU is visible")
    except Exception as e:
        import ctypes.util
        import glob

        # no driver at all reads as "driver version is insufficient" to the CUDA runtime: say what it is
        missing = not glob.glob("/dev/nvidia*") and ctypes.util.find_library("cuda") is None
        why = "this machine has no NVIDIA driver (no /dev/nvidia* device, no libcuda)" if missing else f"{type(e).__name__}: {e}"
        print(f"a GPU is needed from here on (validate, plans, execution): {why}")
        return 3
    print(f"GPU: {torch.cuda.get_device_name(0)}")
    stream = torch.cuda.current_stream()
    handle = cudnn.create_handle()
    cudnn.set_stream(handle, stream.cuda_stream)  # cuDNN runs on torch's stream: no race at the hand-over

    # Step 2: validate (shapes, types and parameters agree; frontend 1.32 needs the driver here),
    # lower the graph to cuDNN's backend descriptors, and ask the heuristics for a ranked list of
    # execution plans (an engine with its knob settings): mode A is a quick learned model,
    # FALLBACK adds engines that always apply.
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans([getattr(cudnn.heur_mode, h) for h in HEURISTICS])
    # fp32 means IEEE fp32: engines that read fp32 inputs as TF32 (tensor cores, 10-bit
    # mantissa) carry these numerical notes and are removed; tf32 asks for them on purpose.
    if DTYPE == "fp32" and not EVERY_PLAN:
        graph.deselect_numeric_notes([cudnn.numerical_note.TENSOR_CORE, cudnn.numerical_note.DOWN_CONVERT_INPUTS])
    elif DTYPE == "tf32" and not EVERY_PLAN:
        graph.select_numeric_notes([cudnn.numerical_note.TENSOR_CORE])
    count = graph.get_execution_plan_count()
    names = [graph.get_plan_name_at_index(i) for i in range(count)]
    print(f"plans offered ({'+'.join(HEURISTICS)}): {', '.join(names) or 'none'}")
    if count == 0:
        print("FAIL: cuDNN offered no plan for this graph")
        return 1
    graph.check_support()  # raises if no remaining plan supports this graph on this GPU

    # Step 3: build one plan (compiles or loads its kernels): the one the check ran, or the first that builds.
    chosen = None
    for i in ([names.index(ENGINE)] if ENGINE in names else [] if ENGINE else range(count)):
        try:
            graph.build_plan_at_index(i)
            chosen = i
            break
        except Exception as e:
            print(f"plan {names[i]} does not build: {e}")
    if chosen is None:
        print(f"FAIL: {'plan ' + ENGINE + ' is not offered or' if ENGINE else 'no plan'} does not build here")
        return 1
    print(f"engine: {names[chosen]} (plan {chosen} of {count})")

    with cupy.cuda.ExternalStream(stream.cuda_stream):
        inputs = make_inputs()  # step 4
        # Step 5: buffers on the GPU (CuPy), in memory order; bf16 is held as its 16-bit patterns.
        buffers = {}
        for role, shape in {"X": X_SHAPE, "W": W_SHAPE, "DY": Y_SHAPE, "B": [1, K] + [1] * ND}.items():
            if role in t and role in inputs:
                buffers[role] = device_buffer(cupy, inputs[role], shape)
        out_shape = {"Y": Y_SHAPE, "DX": X_SHAPE, "DW": W_SHAPE}[out_role]
        out = device_buffer(cupy, None, out_shape)  # poisoned with NaN: an unwritten element cannot pass
        # Some engines need scratch memory (split-K partial sums, transformed data); the plan says how much.
        workspace = cupy.empty(max(graph.get_workspace_size_plan_at_index(chosen), 1), dtype=cupy.uint8)
        # Execute: the variant pack maps each graph tensor to its device pointer.
        pack = {t[role]: buf.data.ptr for role, buf in buffers.items()}
        pack[t[out_role]] = out.data.ptr
        graph.execute_plan_at_index(pack, workspace.data.ptr, chosen, handle=handle)
        ours = torch.from_dlpack(out)  # the same memory, no copy
        if DTYPE == "bf16":
            ours = ours.view(torch.bfloat16)
        if out_role == "DX":  # rows a negative back padding never reads: their gradient is 0
            for axis, (c, i) in enumerate(zip(CROPPED, INPUT)):
                ours.narrow(2 + axis, c, i - c).zero_()

        # Step 6: the reference: torch in float64, cuDNN disabled (torch's native kernels).
        def f64(role):
            a = inputs.get(role)
            return None if a is None else torch.as_tensor(a, device="cuda").to(STORAGE).double()

        x, w, dy, bias = f64("X"), f64("W"), f64("DY"), f64("B")
        torch.backends.cudnn.enabled = False
        ref = direction_sum(x, w, dy, bias, ACTIVATION)
        # Step 7: the bound, and the verdict.
        allowed = allowed_error(ref, x, w, dy, bias)
        torch.backends.cudnn.enabled = True
    return verdict(ours, ref, allowed)


def device_buffer(cupy, values, shape):
    """A CuPy buffer of logical ``shape`` laid out by ``strides``: filled with ``values``, or NaN."""
    kind = {"fp32": np.float32, "tf32": np.float32, "fp16": np.float16, "bf16": np.uint16}[DTYPE]
    order = [0, *range(2, len(shape)), 1] if CHANNELS_LAST else list(range(len(shape)))
    physical = cupy.empty([shape[a] for a in order], dtype=kind)
    logical = physical.transpose([order.index(a) for a in range(len(shape))])
    view = torch.from_dlpack(logical)
    if DTYPE == "bf16":
        view = view.view(torch.bfloat16)
    view.copy_(torch.full(shape, math.nan) if values is None else torch.as_tensor(values).reshape(shape))
    return logical


if __name__ == "__main__":
    sys.exit(main())
