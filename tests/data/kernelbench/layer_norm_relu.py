# A KernelBench-format problem written for kevo's tests: nn.LayerNorm over the
# last two dims (weights drawn at random, so a kernel that ignores them is
# wrong), then ReLU. The bridge (docs/kernelbench.md) lowers both.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features, width):
        super().__init__()
        self.norm = nn.LayerNorm((features, width))
        nn.init.uniform_(self.norm.weight, 0.5, 1.5)
        nn.init.uniform_(self.norm.bias, -0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.norm(x))


batch_size = 24
features = 16
width = 96


def get_inputs():
    return [torch.randn(batch_size, features, width) * 3 + 1]


def get_init_inputs():
    return [features, width]
