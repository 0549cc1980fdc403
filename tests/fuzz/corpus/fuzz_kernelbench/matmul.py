# A KernelBench-format problem written for kevo's tests (in the style of
# KernelBench level1/1_Square_matrix_multiplication_.py, much smaller): a
# linear layer, so that the model has seeded parameters that ModelNew must
# reproduce from the same init inputs.
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = x @ W^T + b with W, b initialised by nn.Linear."""

    def __init__(self, in_features: int, out_features: int):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


M = 64
K = 96
N = 80


def get_inputs():
    return [torch.randn(M, K)]


def get_init_inputs():
    return [K, N]
