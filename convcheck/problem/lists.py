"""The layer lists that come with convcheck (``shapes_NAME``: ResNet-50, AlexNet, 1x1, depthwise...,
from oneDNN's benchdnn), taken by name wherever a batch file is: ``--batch resnet_50``,
``problems="resnet_50"``. They are part of the installed package (``convcheck/problem/layer_lists``;
a checkout also shows them as ``cases/benchdnn``)."""

from __future__ import annotations

from pathlib import Path

#: Where the lists are: inside the package, so that an installed convcheck has them too.
BUNDLED = Path(__file__).resolve().parent / "layer_lists"


def names() -> list[str]:
    """The lists' names (``resnet_50`` for ``shapes_resnet_50``)."""
    return sorted(p.name.removeprefix("shapes_") for p in BUNDLED.glob("shapes_*")) if BUNDLED.is_dir() else []


def batch_file(text) -> Path:
    """``text`` as a batch file: the file it names, or else the bundled list of that name (the path as
    given where neither is: its reader says it is missing)."""
    path = Path(text)
    if path.is_file():
        return path
    bundled = BUNDLED / f"shapes_{text}"
    return bundled if bundled.is_file() else path
