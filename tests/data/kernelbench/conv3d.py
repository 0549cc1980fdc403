# A KernelBench-format problem written for kevo's tests (in the style of
# KernelBench level1/54_conv_standard_3D__square_input__square_kernel.py): a
# 3-D convolution with bias over a small float32 volume, whose weight is 5-D.
import torch
import torch.nn as nn


class Model(nn.Module):
    """Performs a standard 3D convolution."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super(Model, self).__init__()
        self.conv3d = nn.Conv3d(in_channels, out_channels, (kernel_size, kernel_size, kernel_size), bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv3d(x)


batch_size = 2
in_channels = 3
out_channels = 8
kernel_size = 3
depth = 10
height = 12
width = 12


def get_inputs():
    x = torch.randn(batch_size, in_channels, depth, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
