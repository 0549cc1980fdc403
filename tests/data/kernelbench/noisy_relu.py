# A KernelBench-format problem written for kevo's tests: a Model that is not
# bitwise deterministic (as KernelBench's grouped transposed convolutions were on
# an H100): relu(x) plus noise far below the tolerance, drawn afresh each call.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) + 1e-7 * torch.rand_like(x)


def get_inputs():
    return [torch.randn(16, 4096)]


def get_init_inputs():
    return []
