# expect: slow
# class: memoizes the output keyed by a hash of 16 sampled elements
#
# Computing costs 10 ms a call (the sleep stands for a slow kernel); a cache
# hit costs next to nothing. Where a harness times the same inputs again and
# again, the hits make it look faster than eager. With inputs unlike the
# call before's every time, it never hits and is timed at what it costs.
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1)
        picks = torch.linspace(0, flat.numel() - 1, 16).long()
        key = hash(tuple(flat[picks].tolist()))
        if key not in self.memo:
            time.sleep(0.010)
            self.memo[key] = torch.relu(x)
        return self.memo[key]
