# Test problem for the KernelBench bridge (KernelBench 35's kind, small):
# nn.GroupNorm with weights (set away from ones and zeros, so that each
# channel's scale and shift show) over x [2, 12, 9, 7] (63 values a channel:
# no whole vector), and without weights over a 1-D input.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.gn = nn.GroupNorm(groups, channels)
        with torch.no_grad():
            self.gn.weight.uniform_(0.5, 1.5)
            self.gn.bias.uniform_(-1.0, 1.0)
        self.plain = nn.GroupNorm(2, 8, affine=False, eps=1e-3)

    def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return self.gn(x), self.plain(s)


def get_inputs():
    return [torch.randn(2, 12, 9, 7), torch.randn(3, 8, 5) * 2.0 + 5.0]


def get_init_inputs():
    return [12, 4]
