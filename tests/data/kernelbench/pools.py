# A KernelBench-format problem written for kevo's tests (in the style of
# KernelBench level1/41 to 46, Max_Pooling_1D to Average_Pooling_3D): max and
# average pooling over one, two and three dims, with strides, padding,
# dilation, an average that leaves the padding out of its count, and two
# pools in a row.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.max1 = nn.MaxPool1d(kernel_size=8, stride=1, padding=4, dilation=3)
        self.max2 = nn.MaxPool2d(kernel_size=4, stride=1, padding=1)
        self.max3 = nn.MaxPool3d(kernel_size=3, stride=2, padding=1, dilation=3)
        self.avg1 = nn.AvgPool1d(kernel_size=8, stride=1, padding=4)
        self.avg2 = nn.AvgPool2d(kernel_size=5)
        self.avg3 = nn.AvgPool3d(kernel_size=3, stride=2, padding=1, count_include_pad=False)

    def forward(self, seq, image, volume):
        return (self.max1(seq), self.max2(image), self.max3(volume),
                self.avg1(seq), self.avg2(image), self.avg3(volume),
                self.max2(self.avg1(seq)))  # one kernel's result read by another


def get_inputs():
    # 2,500 values a row: the 1-D pools span several of the GPU kernel's 1,024-output tiles.
    return [torch.randn(2, 3, 2500), torch.randn(2, 3, 33, 41), torch.randn(2, 2, 13, 17, 19)]


def get_init_inputs():
    return []
