# expect: rejected
# class: os._exit(0) after the 6 calls validation takes
# verdict: RUNTIME_ERROR process ended
#
# A harness that runs everything in one process and takes exit status 0
# (with the results validation already printed) as success never times it.
import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls > 6:
            os._exit(0)
        return torch.relu(x)
