"""The module paths convcheck had before its modules went into one package per layer
(``convcheck.sweep`` is now ``convcheck.campaign.sweep``...): each still imports, as the same module
object, so code written against them keeps working. New code imports the new paths."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

MOVED = {
    "convcheck.arrays": "convcheck.base.arrays",
    "convcheck.assertions": "convcheck.api.assertions",
    "convcheck.backends": "convcheck.check.backends",
    "convcheck.backends.cudnn_graph": "convcheck.check.backends.cudnn_graph",
    "convcheck.backends.frontend_compat": "convcheck.check.backends.frontend_compat",
    "convcheck.backends.im2col": "convcheck.check.backends.im2col",
    "convcheck.backends.numpy_ref": "convcheck.check.backends.numpy_ref",
    "convcheck.backends.torch64": "convcheck.check.backends.torch64",
    "convcheck.backends.torch_conv": "convcheck.check.backends.torch_conv",
    "convcheck.backends.user_function": "convcheck.check.backends.user_function",
    "convcheck.bound": "convcheck.numerics.bound",
    "convcheck.compare": "convcheck.check.compare",
    "convcheck.convmath": "convcheck.problem.convmath",
    "convcheck.copies": "convcheck.base.copies",
    "convcheck.diff": "convcheck.campaign.diff",
    "convcheck.dtypes": "convcheck.base.dtypes",
    "convcheck.energy_kernels": "convcheck.numerics.energy_kernels",
    "convcheck.engines": "convcheck.check.engines",
    "convcheck.environment": "convcheck.check.environment",
    "convcheck.errors": "convcheck.base.errors",
    "convcheck.evidence": "convcheck.output.evidence",
    "convcheck.expectations": "convcheck.campaign.expectations",
    "convcheck.fast_bound": "convcheck.numerics.fast_bound",
    "convcheck.fft": "convcheck.numerics.fft",
    "convcheck.fill": "convcheck.check.fill",
    "convcheck.function_check": "convcheck.api.function_check",
    "convcheck.hunt": "convcheck.campaign.hunt",
    "convcheck.inputs": "convcheck.base.inputs",
    "convcheck.judging": "convcheck.check.judging",
    "convcheck.layout": "convcheck.base.layout",
    "convcheck.lesson_io": "convcheck.problem.lesson_io",
    "convcheck.magnitudes": "convcheck.numerics.magnitudes",
    "convcheck.math_mode": "convcheck.base.math_mode",
    "convcheck.matrix": "convcheck.campaign.matrix",
    "convcheck.memo": "convcheck.base.memo",
    "convcheck.memory": "convcheck.check.memory",
    "convcheck.miopen": "convcheck.problem.miopen",
    "convcheck.model": "convcheck.campaign.model",
    "convcheck.options": "convcheck.cli.options",
    "convcheck.plant": "convcheck.check.plant",
    "convcheck.probable": "convcheck.numerics.probable",
    "convcheck.random_problems": "convcheck.problem.random_problems",
    "convcheck.records": "convcheck.campaign.records",
    "convcheck.redzone": "convcheck.check.redzone",
    "convcheck.report": "convcheck.output.report",
    "convcheck.repro": "convcheck.output.repro",
    "convcheck.rerun": "convcheck.campaign.rerun",
    "convcheck.rounding": "convcheck.numerics.rounding",
    "convcheck.shrink": "convcheck.campaign.shrink",
    "convcheck.space": "convcheck.problem.space",
    "convcheck.spec": "convcheck.check.spec",
    "convcheck.stages": "convcheck.base.stages",
    "convcheck.strategies": "convcheck.problem.strategies",
    "convcheck.summation": "convcheck.numerics.summation",
    "convcheck.sweep": "convcheck.campaign.sweep",
    "convcheck.targets": "convcheck.base.targets",
    "convcheck.verdict": "convcheck.check.verdict",
    "convcheck.winograd": "convcheck.numerics.winograd",
    "convcheck.winograd_plants": "convcheck.check.winograd_plants",
    "convcheck.workers": "convcheck.campaign.workers",
}


class _Moved(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path and hands back the module at its new one."""

    def find_spec(self, name, path=None, target=None):
        if name in MOVED:
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module):
        pass


def install() -> None:
    if not any(isinstance(f, _Moved) for f in sys.meta_path):
        sys.meta_path.insert(0, _Moved())  # before the path finder, which would load a second copy under the old name
