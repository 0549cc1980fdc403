# A KernelBench-format problem written for kevo's tests (in the style of
# KernelBench level1/95_CrossEntropyLoss): F.cross_entropy of logits and int64
# class targets with its defaults, which the bridge lowers (twice: the second
# with targets PyTorch ignores, -100, which the kernel's call leaves to
# PyTorch), and one with label smoothing, which it leaves to PyTorch.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, predictions, targets, some_ignored):
        plain = torch.nn.functional.cross_entropy(predictions, targets)
        ignoring = torch.nn.functional.cross_entropy(predictions, some_ignored)
        # Last: torch 1.13's meta tensors cannot run label smoothing, so the
        # capture has no shapes from here on.
        smoothed = torch.nn.functional.cross_entropy(predictions, targets, label_smoothing=0.1)
        return plain, ignoring, smoothed


def get_inputs():
    targets = torch.randint(0, 1000, (64,))
    some_ignored = targets.clone()
    some_ignored[::7] = -100
    return [torch.randn(64, 1000) * 3, targets, some_ignored]


def get_init_inputs():
    return []
