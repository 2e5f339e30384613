"""The device path's cheap majorant of conv(|x|,|w|), checked on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from convcheck.bound import dense_abs_conv
from convcheck.check import abs_conv
from convcheck.device_check import _magnitudes
from convcheck.fill import make_inputs
from convcheck.problem import parse_descriptor


@pytest.mark.parametrize("desc,kw", [
    ("mb2ic16ih14oc8oh14kh3ph1", {}),
    ("g4mb2ic16ih13oc8oh7kh3sh2ph1dh1", {"mode": "conv"}),
    ("g8mb1ic8iw30oc16ow30kw5pw2", {"layout": "nxc"}),
    ("mb2ic8ih9oc8oh9kh3ph1", {"fuse": ("bias", "relu")}),
])
def test_majorant_bounds_the_exact_sums_and_is_not_loose(desc, kw):
    p = parse_descriptor(desc, **kw)
    inputs = make_inputs(p, 4)
    t = {"X": torch.from_numpy(inputs.x), "W": torch.from_numpy(inputs.w)}
    if inputs.bias is not None:
        t["B"] = torch.from_numpy(inputs.bias).reshape((1, p.oc) + (1,) * p.ndim)
    major, note = _magnitudes(p, t)
    major = dense_abs_conv(major)
    exact = abs_conv(p, inputs, "cpu").a.numpy()
    assert "majorant" in note
    assert (major.numpy() >= exact * (1 - 1e-12)).all()
    inside = exact > 0
    assert float(np.median(major.numpy()[inside] / exact[inside])) < 3.0
