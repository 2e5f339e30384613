"""How much memory one check needs, estimated before anything is allocated.

A check holds, per input element (x, w, and dy for backward directions): the fill's
float32 array, the copy each implementation converts it into, and the |.| and squared
copies the bound's magnitudes are summed from; per result element: the output under
test, the float64 reference, A and S2 (float64, from float32 sums) and the float64
temporaries of the comparison, and on given data the probable level's own arrays. Counted
generously (bytes per element below), so a problem that passes this estimate does not die
half-way on an allocation; one that does not is refused with the numbers, before a byte is
spent. How generous, path by path, is measured in docs/DESIGN.md 10.
"""

from __future__ import annotations

import math
import os
import re

from ..base.errors import BadInput

#: Bytes per element held at once (see the module's docstring), per input element, on every path: a
#: declared Winograd wgrad's working set grows by about its estimate per image (docs/DESIGN.md 10), and
#: these bytes are part of its margin.
BYTES_PER_INPUT = 40
#: Per result element, where the check may hold whole-tensor temporaries: given data (the probable
#: level's arrays, convcheck.numerics.probable: held 0.52-0.76 of the whole estimate, docs/DESIGN.md 10), and any
#: check that uses a GPU (its comparison runs on whole tensors; not measured on a GPU).
BYTES_PER_RESULT = 112
#: Per result element of a check on inputs convcheck drew (random or exact fill) with every array on the
#: host: no probable level, and the comparison in cache-sized chunks (convcheck.check.compare.CHUNK), so a result
#: holds the output under test, the float64 reference and the bound's A and S2, not all at once. Measured
#: (docs/DESIGN.md 10: the growth from batch 2 to 4 at VGG-16's conv1_2) 7-14 bytes in fp32, 32-41 with the
#: fp16 copies; counted half of :data:`BYTES_PER_RESULT`.
BYTES_PER_DRAWN_RESULT_ON_HOST = 56
#: Per result element, what a declared Winograd bound and the fp32 Winograd under test hold beside a direct
#: check's own, on top of :data:`BYTES_PER_DRAWN_RESULT_ON_HOST`: the bound's own A and S2 and the
#: evaluations they are made of (convcheck.numerics.winograd.coefficient_error, rounding_energy), which do not
#: all live at once. Measured at VGG-16's conv1_2 from batch 2 to 4, F(2,3) dgrad fp32: 22 bytes a result
#: more than the direct check's (36 against 14; fprop fp16: 30, under the direct check's 41); counted 32.
#: Given data and GPU checks count it in :data:`BYTES_PER_RESULT`.
WINOGRAD_BYTES_PER_RESULT = 32
#: The comparison's cache-sized float64 chunks and libraries' small scratch, on top of the
#: float64 reference's column blocks (:func:`scratch`).
FIXED_OVERHEAD = 8 * 2 ** 20

_UNITS = {"": 1, "b": 1, "k": 2 ** 10, "m": 2 ** 20, "g": 2 ** 30, "t": 2 ** 40}


def parse_size(text: str) -> int:
    """'8G', '512M', '1.5T' or a plain number of bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", str(text), flags=re.IGNORECASE)
    if not m:
        raise BadInput(f"memory size {text!r}: expected a number of bytes or one like 512M, 8G, 1.5T")
    size = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if size <= 0:
        raise BadInput(f"memory size {text!r} must be positive")
    return size


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


def native_columns(problem, device: str = "cuda") -> int:
    """Bytes of the column buffer torch's native float64 convolution (the ``torch64`` reference,
    cuDNN disabled) holds at once. On a GPU, one image and group: (C/g) x kernel taps x output
    positions. On the CPU, fprop and wgrad (slow_conv2d's ``finput``) unfold the whole batch at once,
    one group at a time: that times the batch. Measured on the CPU (torch 2.13, 56x56x64, 3x3, fp32,
    RSS over the NumPy reference's check): wgrad held one image's columns more per image (batch 2,
    8, 16: 0.02, 0.12, 0.19 GiB), fprop about two thirds of that, dgrad none; counted per image, a
    batch-16 wgrad check held 0.87 of its estimate and a batch-32 one would have held more than it."""
    per_image = (problem.ic // problem.groups) * math.prod(problem.kernel) * math.prod(problem.output) * 8
    return per_image * (problem.mb if device == "cpu" and problem.direction != "dgrad" else 1)


def estimate(problem, reference: str | None = None, algorithm=None, operand_slice: int | None = None,
             devices=("cpu",), data: str = "given") -> int:
    """Bytes one check of ``problem`` holds at its peak, on each of ``devices`` it uses (with the
    ``torch64`` reference, its native kernels' column buffer where it runs too; judged by a declared
    Winograd ``algorithm`` (convcheck.numerics.fast_bound.Algorithm), its bound's own working set too:
    :func:`winograd_bytes`, its left operand in slices of ``operand_slice``). ``data``: "random" for
    inputs convcheck draws (random or exact fill), "given" (the default, the larger) for the caller's:
    :func:`bytes_per_result`."""
    inputs = math.prod(problem.x_shape) + math.prod(problem.w_shape)
    if problem.direction != "fprop":
        inputs += math.prod(problem.y_shape)
    columns = native_columns(problem, _reference_device(devices)) if reference == "torch64" else 0
    fast = winograd_bytes(problem, _winograd_m(algorithm), operand_slice) if _winograd_m(algorithm) else 0
    return (inputs * BYTES_PER_INPUT + math.prod(problem.result_shape) * bytes_per_result(data, devices, algorithm, problem.dtype)
            + scratch(problem) + columns + fast)


def bytes_per_result(data: str = "given", devices=("cpu",), algorithm=None, dtype: str = "fp32") -> int:
    """Bytes a result element holds at once: :data:`BYTES_PER_RESULT` for given data, a check that uses
    a GPU, or fp16/bf16 (on torch's slow kernels, where oneDNN does not take the type, a check's peak
    varies with how the C heap reuses its freed arrays: an fp16 dgrad check at 28x28x64, batch 32, held
    0.39-0.58 of the smaller figure's estimate in fresh processes, and 1.12 and 1.66 in two test-suite runs);
    else (drawn fp32 inputs, every array on the host) :data:`BYTES_PER_DRAWN_RESULT_ON_HOST`, and
    :data:`WINOGRAD_BYTES_PER_RESULT` more for a declared Winograd ``algorithm``'s bound."""
    if data == "given" or "cuda" in devices or dtype in ("fp16", "bf16"):
        return BYTES_PER_RESULT
    return BYTES_PER_DRAWN_RESULT_ON_HOST + (WINOGRAD_BYTES_PER_RESULT if _winograd_m(algorithm) else 0)


def _winograd_m(algorithm) -> int:
    """The tile size m of a declared Winograd ``algorithm`` (2 where unknown, the most tiles per output);
    0 for any other."""
    return (algorithm.m or 2) if getattr(algorithm, "kind", None) == "winograd" else 0


def _winograd_sizes(problem, m: int) -> tuple[int, int, int, int, int]:
    """(G, I, S, J, alpha) of the Winograd form of ``problem`` (convcheck.numerics.winograd.Bilinear): the left
    operand is (G, I, S, .), the right (G, J, S, alpha, alpha)."""
    a = m + problem.kernel[0] - 1
    g = problem.groups
    cg, kg = problem.ic // g, problem.oc // g
    if problem.direction == "wgrad":  # sum over images and tiles of dy: (output channel) x (input channel)
        return g, kg, problem.mb * _tiles(problem.y_shape[2:], m), cg, a
    # sum over channels: (filter row) x (image and tile of the result)
    mapped = problem.y_shape[2:] if problem.direction == "fprop" else problem.x_shape[2:]
    i, s = (kg, cg) if problem.direction == "fprop" else (cg, kg)
    return g, i, s, problem.mb * _tiles(mapped, m), a


def winograd_bytes(problem, m: int, operand_slice: int | None = None) -> int:
    """Bytes the Winograd F(m x m, r x r) bound holds beside the check's own arrays at its peak, the
    rounding energy (convcheck.numerics.winograd.rounding_energy), float64: the form's two operands (the filters
    and the alpha x alpha input tiles, or in wgrad the m x m output-gradient tiles and the input tiles),
    the left one's transformed tiles six times over (in slices of at most ``operand_slice``, default
    OPERAND_SLICE_ELEMENTS: the tile and its three passes' energies, its square, a first pass's reshaped
    copy), and the right one's slices with the energy's intermediates (ENERGY_SLICE_ELEMENTS each, a
    dozen). Where the form is summed in chunks of s (convcheck.numerics.winograd.sums_along_s: wgrad), nothing
    is transformed whole, but both operands grow with the batch and are built more than once at a time
    (the bound's form beside the magnitudes' and the coefficient error's): the operands twice and a
    dozen chunks (measured at VGG-16's conv1_2, F(2,3), batch 2 to 4: 288 MB held an image against 385
    asked with the operands once). Its output-sized arrays are the per-result bytes'
    (:func:`bytes_per_result`). Measured against a process's RSS (docs/DESIGN.md 10)."""
    from ..numerics.winograd import ENERGY_SLICE_ELEMENTS, left_slice_elements, sums_along_s

    g, i, s, j, a = _winograd_sizes(problem, m)
    r = problem.kernel[0]
    left = g * i * s * (m * m if problem.direction == "wgrad" else r * r)
    right = g * j * s * a * a
    if sums_along_s(i, s, j):
        return 8 * (2 * (left + right) + 12 * ENERGY_SLICE_ELEMENTS)
    return 8 * (left + right + 6 * left_slice_elements(g, i, s, a, operand_slice) + 12 * ENERGY_SLICE_ELEMENTS)


def smaller_operand_slices(problem, algorithm) -> list[int]:
    """The operand slices (convcheck.numerics.winograd.Bilinear.operand_slice) below the default a Winograd check
    of ``problem`` can be given, largest first: OPERAND_SLICE_ELEMENTS halved down to
    MIN_OPERAND_SLICE_ELEMENTS, one i a slice where an i holds more; only those that hold fewer elements
    than the one before. Empty for any other algorithm, where the left operand's transformed tiles are
    smaller than that (slicing them would save nothing worth its time), and where the form is summed in
    chunks of s (wgrad: convcheck.numerics.winograd.sums_along_s), which transforms nothing whole."""
    from ..numerics.winograd import (MIN_OPERAND_SLICE_ELEMENTS, OPERAND_SLICE_ELEMENTS, left_slice_elements, sums_along_s)

    m = _winograd_m(algorithm)
    if not m:
        return []
    g, i, s, j, a = _winograd_sizes(problem, m)
    if sums_along_s(i, s, j):
        return []
    found, held = [], left_slice_elements(g, i, s, a)
    size = OPERAND_SLICE_ELEMENTS // 2
    while size >= MIN_OPERAND_SLICE_ELEMENTS:
        now = left_slice_elements(g, i, s, a, size)
        if now < held:
            found.append(size)
            held = now
        size //= 2
    return found


def _tiles(size, m: int) -> int:
    return math.prod(-(-d // m) for d in size)


def scratch(problem) -> int:
    """Bytes of scratch beside the arrays: the NumPy reference's column blocks (at most
    ``numpy_ref.MAX_COLUMN_BYTES``, fewer for a small problem) and :data:`FIXED_OVERHEAD`."""
    from .backends.numpy_ref import MAX_COLUMN_BYTES

    return min(MAX_COLUMN_BYTES, native_columns(problem) * problem.mb * problem.groups) + FIXED_OVERHEAD


def _glibc(name: str, argtypes: list):
    """glibc's function ``name`` (its int result), or None where the C library has none."""
    import ctypes

    try:
        fn = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = argtypes, ctypes.c_int
    return fn


def return_freed_heap() -> bool:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim(0)``); False where there is
    no such call (not glibc). Why: arrays under glibc's mmap threshold (32 MiB at most; the energy's
    chunks and Q slices are sized to it, convcheck.numerics.winograd) come from the heap, and what a finished
    check freed there stays in this process's RSS, so MemAvailable understates what the next check
    of the same process can have. A benchmark process on VGG-16's conv1_2 at batch 32 held 8.7 GB
    between checks, and its next check (asked 19.4 GiB, 18.1 available) was refused."""
    import ctypes

    trim = _glibc("malloc_trim", [ctypes.c_size_t])
    return bool(trim(0)) if trim is not None else False


#: glibc's mallopt parameters: M_TRIM_THRESHOLD and M_MMAP_THRESHOLD.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def keep_freed_heap() -> None:
    """For convcheck's own worker processes only (never a process that imports convcheck): glibc keeps the
    memory a check freed for the next one instead of handing it back at once. Arrays up to 32 MiB (glibc's
    largest mmap threshold) come from the heap, and the heap is not trimmed after every free: otherwise every
    check's inputs, outputs and reference were fresh pages, each faulted in as it was first written (a
    25 MB input of a 1x1 layer: 6,000 faults). Measured (benchmarks/sweep_throughput.py's sweep, 2-core
    Xeon, best of 3, twice): shapes_1x1 at batch 8 0.57-0.58 s -> 0.50-0.52 s, ResNet-50 0.47-0.49 ->
    0.44, the mixed depthwise/1x1 list 0.72-0.74 -> 0.70-0.71, the depthwise list unchanged. What the
    worker then holds is handed back when a check would not fit otherwise (:func:`return_freed_heap`, in
    :func:`require_room`). Nothing where the C library is not glibc."""
    import ctypes

    mallopt = _glibc("mallopt", [ctypes.c_int, ctypes.c_int])
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, 32 << 20)
        mallopt(_M_TRIM_THRESHOLD, 2 ** 31 - 1)


#: The last reading of :func:`available_host`: (monotonic seconds, bytes).
_HOST_READ: list = [None]
#: A check that needs less than this fraction of the memory last read as available, read at most
#: :data:`SMALL_NEED_AGE_S` ago, is not worth reading /proc/meminfo again for (a sweep of small layers
#: would read it for every check: 24 us of a check of a millisecond).
SMALL_NEED_FRACTION = 1 / 64
SMALL_NEED_AGE_S = 1.0


def available_host(need: int | None = None) -> int | None:
    """Memory the kernel says is available now (MemAvailable), else None. ``need``: what the caller is about
    to ask for; where it is a small fraction of a reading under a second old (:data:`SMALL_NEED_FRACTION`),
    that reading."""
    import time

    last = _HOST_READ[0]
    if need is not None and last is not None and time.monotonic() - last[0] < SMALL_NEED_AGE_S \
            and need < SMALL_NEED_FRACTION * last[1]:
        return last[1]
    found = _read_available_host()
    if found is not None:
        _HOST_READ[0] = (time.monotonic(), found)
    return found


def _read_available_host() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def available_gpu(allocator: str | None = None) -> int | None:
    """Bytes of GPU memory an allocation can have now: what the driver says is free, plus the blocks the
    allocator that will make it holds freed (``"torch"``: torch's caching allocator; ``"cupy"``: CuPy's
    pool; None: neither). Each allocator reuses only its own freed blocks; the driver counts them as used,
    so one allocator's are never counted for the other's allocation. None without a GPU."""
    import sys

    try:
        import torch

        if not torch.cuda.is_available():
            return None
        free = int(torch.cuda.mem_get_info()[0])
        if allocator == "torch":
            free += int(torch.cuda.memory_reserved()) - int(torch.cuda.memory_allocated())
    except Exception:
        return None
    cupy = sys.modules.get("cupy")  # only where a check used it: importing CuPy here would cost a context
    if allocator == "cupy" and cupy is not None:
        try:
            free += int(cupy.get_default_memory_pool().free_bytes())
        except Exception:
            pass
    return free


#: Caches of GPU memory that may be let go before a check is refused for memory, each a function taking the
#: object to keep (or None): the cuDNN graphs kept for reuse register theirs
#: (:func:`convcheck.check.backends.cudnn_graph.release_graphs`).
GPU_CACHES: list = []


def release_gpu(keep=None, caches: bool = True) -> None:
    """Hand GPU memory held for reuse back to the driver: the kept cuDNN graphs but ``keep`` (their buffers
    and workspaces; ``caches`` False keeps them all), then the blocks CuPy's pool and torch's caching
    allocator hold freed for their own reuse. What the driver then says is free is what any allocation can
    have. Done only before a refusal: the caches are a saving, never a reason to refuse a check."""
    import sys

    for release in GPU_CACHES if caches else ():
        release(keep)
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        try:
            cupy.get_default_memory_pool().free_all_blocks()
        except Exception:
            pass
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


#: What in an error says an allocation failed: torch's and CuPy's out-of-memory errors, cuDNN's statuses.
OUT_OF_MEMORY = ("OutOfMemoryError", "out of memory", "ALLOCATION_FAILED", "ALLOC_FAILED")


def out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is a GPU allocation that failed (torch, CuPy or cuDNN): a check that did not fit,
    recorded as refused with the figures, not as an error of the implementation."""
    names = {cls.__name__ for cls in type(error).__mro__}
    return bool(names & {"OutOfMemoryError"}) or any(mark in str(error) for mark in OUT_OF_MEMORY)


def out_of_memory_message(error: BaseException, problem, devices, reference: str | None = None) -> str:
    """One line: what the check was estimated to need, what was available, and what the library said."""
    need = estimate(problem, reference, devices=tuple(devices), data="random")
    free = available_gpu() if "cuda" in devices else available_host()
    said = " ".join(str(error).split())[:200]
    return (f"out of memory: the check needs about {human(need)} ({problem.descriptor()}); "
            f"{'unknown' if free is None else human(free)} available now; {type(error).__name__}: {said}")


class TooLarge(BadInput):
    """The problem would not fit in memory: refused before anything is allocated."""


def _limits(devices, max_memory: int | None, need: int | None = None) -> list[tuple[int, str]]:
    limits = []
    if max_memory is not None:
        limits.append((max_memory, "the given memory limit"))
    host = available_host(need)  # the host always holds the fill and, on the CPU path, everything
    if host is not None:
        limits.append((host, "available host memory"))
    if "cuda" in devices:
        gpu = available_gpu()
        if gpu is not None:
            limits.append((gpu, "free GPU memory"))
    return limits


def _reference_device(devices) -> str:
    """Where a check on ``devices`` may run its reference: the CPU if it uses one (the larger of the
    two column buffers, :func:`native_columns`), else the GPU."""
    return "cpu" if "cpu" in devices else "cuda"


def require_fits(problem, devices=("cpu",), max_memory: int | None = None, reference: str | None = None,
                 algorithm=None, operand_slice: int | None = None, data: str = "given") -> int:
    """Raise :class:`TooLarge` naming the bytes when ``problem`` would not fit; returns the estimate
    (:func:`estimate`; ``data``: "random" or "given")."""
    need = estimate(problem, reference, algorithm, operand_slice, devices, data)
    for limit, what in _limits(devices, max_memory, need):
        if need > limit:
            sliced = (f" with its Winograd bound's operand in slices of {operand_slice} elements, the smallest"
                      if operand_slice else "")
            raise TooLarge(f"the problem needs about {human(need)} ({need} bytes) to check{sliced}, "
                           f"more than {what} ({human(limit)}); lower the batch size or check a smaller problem")
    return need


def operand_slice_to_fit(problem, devices=("cpu",), max_memory: int | None = None, reference: str | None = None,
                         algorithm=None, data: str = "given") -> int | None:
    """The largest of :func:`smaller_operand_slices` with which a declared Winograd check of ``problem``
    fits every limit (:func:`require_fits`), else the smallest (require_fits then refuses, naming it);
    None where it is not a Winograd check or has nothing smaller to take. Slower, the same answer: each
    slice of the left operand transforms the right one again (docs/DESIGN.md 3e)."""
    sizes = smaller_operand_slices(problem, algorithm)
    limits = _limits(devices, max_memory)
    room = min((limit for limit, _ in limits), default=None)
    for size in sizes:
        if room is None or estimate(problem, reference, algorithm, size, devices, data) <= room:
            return size
    return sizes[-1] if sizes else None


def require_room(problem, devices, max_memory: int | None = None, reference: str | None = None,
                 algorithm=None, data: str = "given") -> tuple[int, int | None]:
    """:func:`require_fits`, after letting go of the kept fast-algorithm bounds
    (:data:`convcheck.numerics.fast_bound.RECENT`) and handing the heap's freed pages back
    (:func:`return_freed_heap`), and on a GPU the allocators' freed blocks and then the kept cuDNN graphs
    (:func:`release_gpu`), where they are what stands in the way: they are a
    saving, never a reason to refuse a check; then, for a declared Winograd ``algorithm``, with its bound's
    left operand in smaller slices (:func:`operand_slice_to_fit`): slower, the same
    answer. ``data``: "random" (inputs convcheck draws) or "given" (:func:`bytes_per_result`).
    Returns (the estimate, that operand slice or None for the default); raises
    :class:`TooLarge` if it still would not fit."""
    from ..numerics.fast_bound import RECENT

    try:
        return require_fits(problem, devices, max_memory, reference, algorithm, data=data), None
    except TooLarge:
        released = RECENT.release()
        if return_freed_heap() or released:  # what this process freed, handed back, then asked again
            try:
                return require_fits(problem, devices, max_memory, reference, algorithm, data=data), None
            except TooLarge:
                pass
        if "cuda" in devices:  # the allocators' freed blocks, then the kept cuDNN graphs, back to the driver
            for caches in (False, True):
                release_gpu(caches=caches)
                try:
                    return require_fits(problem, devices, max_memory, reference, algorithm, data=data), None
                except TooLarge:
                    pass
        operand_slice = operand_slice_to_fit(problem, devices, max_memory, reference, algorithm, data)
        return require_fits(problem, devices, max_memory, reference, algorithm, operand_slice, data), operand_slice
