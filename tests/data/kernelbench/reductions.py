# A KernelBench-format problem written for kevo's tests (in the style of
# KernelBench level1/47-53): reductions and indices along dims that are not the last, in
# each form the bridge lowers, and one it does not (over two dims).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.sum(x, dim=self.dim, keepdim=True)  # [4, 1, 50]
        m = torch.max(x, dim=self.dim)[0]  # [4, 50]
        n = torch.amin(x, dim=-2)  # [4, 50]
        a = torch.mean(x, 0)  # [37, 50]
        both = torch.sum(x, dim=(0, 1))  # [50]: stays PyTorch
        first = torch.argmin(x, dim=0)  # [37, 50], int64
        return s.squeeze(1) + m - n, a * 2.0, both, first


def get_inputs():
    return [torch.randn(4, 37, 50)]


def get_init_inputs():
    return [1]
