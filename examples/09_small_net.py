"""A small network whose every convolution `convcheck model` checks.

    convcheck model examples/09_small_net.py:SmallNet --input 8,3,32,32 --data activations

Running this file lists the problems `convcheck model` would make of it (one per
Conv1d/Conv2d/Conv3d call, named by module path) and prints the cuDNN graph of the first.

Run: python examples/09_small_net.py
"""

import sys
from pathlib import Path

import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


class SmallNet(nn.Module):
    """A stem, a grouped block with padding="same", a strided downsample and a 1x1 head."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.block = nn.Sequential(nn.ReLU(), nn.Conv2d(16, 16, 3, padding="same", groups=4, bias=False), nn.ReLU(),
                                   nn.Conv2d(16, 32, 3, stride=2, padding=1, dilation=1))
        self.head = nn.Conv2d(32, 10, 1)

    def forward(self, x):
        return self.head(self.block(self.stem(x)))


#: The problems this example's graphs compute (tests/test_frontend_releases.py builds each on every frontend release).
PROBLEMS = tuple(layer["problem"] for layer in __import__("convcheck.campaign.model", fromlist=["conv_layers"]).conv_layers(
    SmallNet(), (8, 3, 32, 32)))

def main() -> int:
    from convcheck.campaign.model import conv_layers

    layers = conv_layers(SmallNet(), (8, 3, 32, 32))
    for layer in layers:
        print(f"problem: {layer['name']:8s} {layer['problem']}")
    from convcheck.check.backends.cudnn_graph import graph_text_or_why

    print(f"the cuDNN graph of {layers[0]['name']}:\n" + graph_text_or_why(layers[0]["problem"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
