# A KernelBench-format problem written for kevo's tests (in the style of
# KernelBench level1/100_HingeLoss): a loss whose targets broadcast along the
# predictions' leading dim, as KernelBench writes it (targets [cols] against
# predictions [rows, cols]), one with a [1, cols] weight, and the hinge again
# over 392 columns (m % 4 == 0: the GPU kernel's float4 path).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, predictions, targets, weight, q, s):
        hinge = torch.mean(torch.clamp(1 - predictions * targets, min=0))
        weighted = torch.sum(weight * (predictions - 0.5) ** 2)
        aligned = torch.mean(torch.clamp(1 - q * s, min=0))
        return hinge, weighted, aligned


def get_inputs():
    # 3 * 131 columns: the float4 path needs m % 4 == 0, so this takes the other.
    return [torch.randn(37, 393), torch.randint(0, 2, (393,)).float() * 2 - 1, torch.rand(1, 393),
            torch.randn(50, 392), torch.randint(0, 2, (392,)).float() * 2 - 1]


def get_init_inputs():
    return []
