# Test problem for the KernelBench bridge (KernelBench 34's kind, small):
# nn.InstanceNorm2d and nn.InstanceNorm1d at their defaults (no weights, no
# running statistics) are layer norms of each (sample, channel) over the
# spatial dims; one with weights (affine=True) stays PyTorch. x's six rows of
# 32766 values are long enough that the CUDA layer norm splits each across
# blocks (fewer rows than multiprocessors): single floats (no float4s), seven
# chunks, the last one shorter.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.plain = nn.InstanceNorm2d(channels)
        self.loose = nn.InstanceNorm1d(channels, eps=1e-3)
        self.weighted = nn.InstanceNorm2d(channels, affine=True)

    def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        # x [2, 3, 258, 127]; s [2, 3, 37] (an odd length), shifted far from 0
        return self.plain(x), self.loose(s * 3.0 + 100.0), self.weighted(x)


def get_inputs():
    return [torch.randn(2, 3, 258, 127), torch.randn(2, 3, 37)]


def get_init_inputs():
    return [3]
