# Raises in forward: the evaluation must say RUNTIME_ERROR with the traceback.
import torch
import torch.nn as nn


def check_rank(x):
    if x.dim() == 2:
        raise ValueError("kevo-test: rank-2 inputs are not supported")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_rank(x)
        return torch.relu(x)
