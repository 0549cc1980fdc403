# expect: slow
# class: patches torch.relu, torch.nn.functional.relu and Tensor.relu to take 100 ms, so a baseline sharing its process is slow
#
# It computes with clamp_min, which it leaves alone, and costs 10 ms a call
# itself (the sleep stands for a slow kernel). Against a baseline slowed to
# 100 ms it would look 10 times faster than eager.
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

_relu = torch.relu


def _slow_relu(x, *args, **kwargs):
    time.sleep(0.1)
    return _relu(x)


torch.relu = _slow_relu
F.relu = _slow_relu
torch.Tensor.relu = _slow_relu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.010)
        return torch.clamp_min(x, 0.0)
