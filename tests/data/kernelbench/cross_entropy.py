# A KernelBench-format problem written for kevo's tests (in the style of
# KernelBench level1/95_CrossEntropyLoss): F.cross_entropy of logits and int64
# class targets with its defaults, which the bridge lowers, and one with label
# smoothing, which it leaves to PyTorch.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, predictions, targets):
        plain = torch.nn.functional.cross_entropy(predictions, targets)
        smoothed = torch.nn.functional.cross_entropy(predictions, targets, label_smoothing=0.1)
        return plain, smoothed


def get_inputs():
    return [torch.randn(64, 1000) * 3, torch.randint(0, 1000, (64,))]


def get_init_inputs():
    return []
