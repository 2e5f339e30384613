"""MNN 3.6.1's ``MNN.expr.conv2d`` gives wrong outputs for a grouped convolution with 1 < groups < channels;
an ungrouped one (groups = 1) and a depthwise one (groups = channels) are exact on the same data. Checked in
float64 with NumPy alone, on small integers, where every correct float32 sum is exact.

What convcheck found: ``convcheck check g2mb1ic8ih5oc8oh5kh3ph1 --backend
benchmarks/findings/mnn_grouped_conv.py:conv2d --convention numpy`` fails (benchmarks/findings.py shows its
verdict and diagnosis); the same with ``g1`` and ``g8`` passes.

Run: python benchmarks/findings/mnn_grouped_conv.py  (pip install MNN==3.6.1 numpy)
Checked by convcheck: the function ``conv2d`` below, NumPy arrays in and out (``--convention numpy``)."""

import numpy as np
import MNN.expr as F


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def conv2d(x, w, stride=1, padding=0, dilation=1, groups=1):
    """A 2-D cross-correlation by ``MNN.expr.conv2d`` (its input in MNN's NC4HW4 format, as it requires)."""
    if x.dtype != np.float32:
        raise NotImplementedError(f"this function passes float32 to MNN, not {x.dtype}")
    k = w.shape[0]
    y = F.conv2d(F.convert(F.const(x, list(x.shape), F.NCHW), F.NC4HW4), F.const(w, list(w.shape), F.NCHW),
                 F.const(np.zeros(k, np.float32), [k]), stride=_pair(stride), padding=_pair(padding),
                 dilate=_pair(dilation), group=groups, padding_mode=F.CAFFE)
    return np.array(F.convert(y, F.NCHW).read(), dtype=np.float32)


def conv64(x, w, groups):
    """The same correlation (stride 1, padding 1) as a float64 direct sum, group by group."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))  # (N, C, H, W, 3, 3)
    cg, kg = w.shape[1], w.shape[0] // groups
    return np.concatenate([np.einsum("nchwij,kcij->nkhw", windows[:, g * cg:(g + 1) * cg], w[g * kg:(g + 1) * kg])
                           for g in range(groups)], axis=1)


def main():
    import MNN

    rng = np.random.default_rng(0)
    channels = 8
    print(f"MNN {MNN.version()}, numpy {np.__version__}; x 1x{channels}x5x5, 3x3 filters, padding 1, integers in [-2, 2]")
    wrong = {}
    for groups in (1, 2, 4, channels):
        x = rng.integers(-2, 3, size=(1, channels, 5, 5)).astype(np.float32)
        w = rng.integers(-2, 3, size=(channels, channels // groups, 3, 3)).astype(np.float32)
        error = np.abs(conv2d(x, w, padding=1, groups=groups) - conv64(x, w.astype(np.float64), groups))
        per_group = error.reshape(channels, -1).max(axis=1).reshape(groups, -1).max(axis=1)
        wrong[groups] = float(error.max())
        print(f"groups={groups}: max |MNN - float64| = {error.max():g} (by group: "
              f"{', '.join(f'{e:g}' for e in per_group)}); wrong outputs {int((error > 0).sum())} of {error.size}")
    grouped = [g for g in wrong if 1 < g < channels]
    reproduced = all(wrong[g] > 0 for g in grouped) and wrong[1] == 0 and wrong[channels] == 0
    print("finding:", f"groups {' and '.join(map(str, grouped))} wrong, groups 1 and {channels} exact" if reproduced
          else "not reproduced here")


if __name__ == "__main__":
    main()
