"""Every convolution layer of a real network, as sweep problems.

``TARGET`` is ``path/to/file.py:Name`` or ``package.module:Name``: a ``torch.nn.Module``
class or a factory, called with no arguments (``torchvision.models:resnet50`` builds the
network with ``weights=None``: nothing is downloaded). The module runs once on a seeded
random input of the given shape with forward hooks on every Conv1d/Conv2d/Conv3d; each
call becomes one problem named by the module's path (``layer1.0.conv2``), with its
groups, dilation, stride and padding (string paddings resolved as torch resolves them).
A padding mode other than zeros (reflect, replicate, circular) is a different
computation: it is recorded as unsupported, not checked as something else.

With ``data="activations"`` each layer is checked on what it really saw: its input
activations, its weights and its bias (given data, judged by the any-data bound).
"""

from __future__ import annotations

import numpy as np

from ..base.errors import BadInput
from ..problem.descriptor import ConvProblem, torch_padding


def load_target(target: str):
    """The ``torch.nn.Module`` that ``path/file.py:Name`` or ``package.module:Name`` builds."""
    import torch

    from ..base.targets import load_object

    factory, _ = load_object(target, "model")
    name = target.rsplit(":", 1)[1]
    if isinstance(factory, torch.nn.Module):
        return factory
    try:
        built = factory()
    except Exception as e:
        raise BadInput(f"model {target!r}: calling {name}() failed: {type(e).__name__}: {e}") from None
    if not isinstance(built, torch.nn.Module):
        raise BadInput(f"model {target!r}: {name}() returned a {type(built).__name__}, not a torch.nn.Module")
    return built


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(v) for v in text.replace("x", ",").split(",") if v.strip())
    except ValueError:
        raise BadInput(f"{text!r}: expected sizes separated by commas, e.g. 1,3,224,224", option="input") from None
    if len(shape) < 3 or any(v <= 0 for v in shape):
        raise BadInput(f"{text!r}: expected N,C and 1 to 3 positive spatial sizes, e.g. 1,3,224,224", option="input")
    return shape


def conv_layers(model, input_shape: tuple[int, ...], seed: int = 0, keep_data: bool = False) -> list[dict]:
    """Run ``model`` once on a random input; one entry per convolution call, in call order:
    {name, module, problem (or None), unsupported (why not), x, w, bias (NumPy, when kept)}."""
    import torch

    convs = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
    found: list[dict] = []
    hooks = []

    def hook(name):
        def record(module, args, output):
            x = args[0]
            entry = {"name": name or type(module).__name__, "module": type(module).__name__}
            try:
                entry["problem"] = _problem(name, module, tuple(x.shape))
                entry["unsupported"] = ""
            except BadInput as e:
                entry["problem"], entry["unsupported"] = None, str(e)
            if module.padding_mode != "zeros":
                entry["unsupported"] = (f"padding_mode={module.padding_mode!r}: convcheck checks zero padding only "
                                        "(the layer pads its input by another rule first)")
            if keep_data:
                entry["x"] = x.detach().float().cpu().numpy()
                entry["w"] = module.weight.detach().float().cpu().numpy()
                entry["bias"] = None if module.bias is None else module.bias.detach().float().cpu().numpy()
            found.append(entry)
        return record

    for name, module in model.named_modules():
        if isinstance(module, convs):
            hooks.append(module.register_forward_hook(hook(name)))
    if not hooks:
        raise BadInput(f"{type(model).__name__} has no Conv1d, Conv2d or Conv3d layer")
    try:
        generator = torch.Generator().manual_seed(seed)
        x = torch.randn(input_shape, generator=generator)
        model.eval()
        with torch.no_grad():
            try:
                model(x)
            except Exception as e:
                raise BadInput(f"running {type(model).__name__} on an input of shape {list(input_shape)} failed: "
                               f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    finally:
        for h in hooks:
            h.remove()
    return found


def _problem(name: str, module, x_shape: tuple[int, ...]) -> ConvProblem:
    kernel = tuple(module.kernel_size)
    pre, post = torch_padding(module.padding, kernel, tuple(module.dilation), tuple(module.stride))
    return ConvProblem(mb=x_shape[0], ic=x_shape[1], oc=module.out_channels, input=x_shape[2:], kernel=kernel,
                       stride=tuple(module.stride), pad_pre=pre, pad_post=post, dilation=tuple(module.dilation),
                       groups=module.groups, name=name, fuse=("bias",) if module.bias is not None else ())


def model_items(target: str, input_shape, data: str = "random", seed: int = 0, **overrides) -> list:
    """Sweep items for every convolution of ``target`` (see the module's docstring); ``overrides``
    (dtype, layout, direction, mode) apply to every problem."""
    from ..base import dtypes
    from ..base.inputs import ConvInputs
    from .sweep import Item

    if data not in ("random", "activations"):
        raise BadInput(f"{data!r}: expected random or activations", option="data")
    model = load_target(target)
    fixed = {k: v for k, v in overrides.items() if v not in (None, ())}
    items = []
    for layer in conv_layers(model, tuple(input_shape), seed, keep_data=data == "activations"):
        p = layer["problem"]
        text = layer["name"]
        if layer["unsupported"] or p is None:
            items.append(Item(target, None, text=text, unsupported=layer["unsupported"] or "not representable"))
            continue
        try:
            if fixed.get("direction", "fprop") != "fprop":
                fixed_here = dict(fixed, fuse=())  # a layer's bias belongs to its forward pass
            else:
                fixed_here = fixed
            p = p.with_(**fixed_here)
        except BadInput as e:
            items.append(Item(target, None, str(e), text=text))
            continue
        inputs = None
        if data == "activations":
            def rnd(a):  # the layer's data as the checked type holds it, so every side reads the same values
                return None if a is None else dtypes.round_to(p.dtype, np.asarray(a, np.float32))
            rng = np.random.default_rng(seed)
            dy = None if p.direction == "fprop" else dtypes.round_to(p.dtype, rng.uniform(-1, 1, p.y_shape).astype(np.float32))
            inputs = ConvInputs(x=rnd(layer["x"]), w=rnd(layer["w"]), seed=seed, dy=dy,
                                bias=rnd(layer["bias"]) if "bias" in p.fuse else None)  # kind="given"
        items.append(Item(target, p, text=text, inputs=inputs))
    return items
