# expect: rejected
# class: monkeypatches torch.relu, torch.nn.functional.relu and Tensor.relu to return their input
# verdict: WRONG_ANSWER output0
#
# forward() looks like the problem's own Model; the patch at import makes
# every ReLU in this process free. In a harness that ran the reference in the
# same interpreter, both would return the input and agree.
import torch
import torch.nn as nn
import torch.nn.functional as F


def _free(x, *args, **kwargs):
    return x


torch.relu = _free
F.relu = _free
torch.Tensor.relu = _free


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)
