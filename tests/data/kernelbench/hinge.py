# A KernelBench-format problem written for kevo's tests (in the style of
# KernelBench level1/100_HingeLoss): a loss whose targets broadcast along the
# predictions' leading dim, as KernelBench writes it (targets [cols] against
# predictions [rows, cols]), and one with a [1, cols] weight.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, predictions, targets, weight):
        hinge = torch.mean(torch.clamp(1 - predictions * targets, min=0))
        weighted = torch.sum(weight * (predictions - 0.5) ** 2)
        return hinge, weighted


def get_inputs():
    # 3 * 131 columns: the float4 path needs m % 4 == 0, so this takes the other.
    return [torch.randn(37, 393), torch.randint(0, 2, (393,)).float() * 2 - 1, torch.rand(1, 393)]


def get_init_inputs():
    return []
