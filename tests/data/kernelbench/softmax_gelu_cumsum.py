# A KernelBench-format problem written for kevo's tests: a multi-op Model
# whose softmax, GELU, leaky ReLU and cumulative sum kevo's CPU recipes can
# run (the bridge, docs/kernelbench.md), each bridge some of them, the rest
# staying PyTorch.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """softmax over rows, GELU, a cumulative sum along the rows, leaky ReLU."""

    def __init__(self, slope):
        super().__init__()
        self.slope = slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.softmax(x, dim=-1)
        y = F.gelu(y)
        y = torch.cumsum(y, dim=1)
        return F.leaky_relu(y, negative_slope=self.slope)


batch_size = 64
dim = 1000


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [0.05]
