"""SciPy's ``scipy.signal.correlate`` with its default ``method="auto"`` computes a multi-channel
3x3 correlation of a 56x56 map by FFT, not by a direct sum: on integer data, where every direct sum
is exact in float32, its answer is off by float32 FFT rounding. Checked in float64 with NumPy alone.

What convcheck found (benchmarks/runtimes.py, a conv2d written with SciPy): ResNet-50's
res2a_branch2b fails the exact check and its diagnosis names "fft: a fast algorithm, within its own
bound"; a direct sum would pass. Declaring it (``--algorithm fft``) judges it by the FFT's bound.

Run: python benchmarks/findings/scipy_auto_fft.py"""

import numpy as np
import scipy
from scipy import signal

rng = np.random.default_rng(0)
x = rng.integers(-2, 3, size=(64, 58, 58)).astype(np.float32)  # one image's 64 channels, padded by 1
w = rng.integers(-2, 3, size=(64, 3, 3)).astype(np.float32)    # one filter
exact = signal.correlate(x.astype(np.float64), w.astype(np.float64), mode="valid", method="direct")[0]
chosen = signal.choose_conv_method(x, w, mode="valid")
auto = signal.correlate(x, w, mode="valid")[0].astype(np.float64)
direct = signal.correlate(x, w, mode="valid", method="direct")[0].astype(np.float64)
print(f"scipy {scipy.__version__}, numpy {np.__version__}")
print(f"choose_conv_method: {chosen!r} (what method='auto' runs)")
print(f"max |direct float32 - float64| = {np.abs(direct - exact).max():g}   (integer sums below 2^24: exact)")
print(f"max |auto float32 - float64|   = {np.abs(auto - exact).max():.3g} over max |y| = {np.abs(exact).max():g}")
print("finding:", "method='auto' chose the FFT: not a direct sum" if chosen == "fft" and np.abs(auto - exact).max() > 0
      else "not reproduced here")
